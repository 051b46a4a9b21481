package model

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Upstream is implemented by the providers the model gateway forwards an
// agent end's raw API calls to (package gateway).
type Upstream interface {
	// Forward POSTs body to path (relative to the provider's base URL,
	// for example "v1/messages") with the provider's credentials and the
	// given extra headers. A response with an error status is returned
	// with its body unread and a nil error; err is set only when no
	// response came. The caller closes the body.
	Forward(ctx context.Context, path string, header http.Header, body []byte) (*http.Response, error)
}

// Forwarded settles what an SDK's raw POST of a forwarded call gave: a
// response with an error status is the answer (the SDKs put its body
// back), an error without one is the failure, and no response at all is
// an error naming provider.
func Forwarded(provider string, res *http.Response, err error) (*http.Response, error) {
	switch {
	case res != nil && res.StatusCode >= 400:
		return res, nil
	case err != nil:
		if res != nil && res.Body != nil {
			res.Body.Close()
		}
		return nil, err
	case res == nil:
		return nil, fmt.Errorf("%s: no response", provider)
	}
	return res, nil
}

// Upstream returns the provider registered under name as an Upstream, or
// an error saying why there is none.
func (r Router) Upstream(name string) (Upstream, error) {
	p := r[name]
	if p == nil {
		return nil, fmt.Errorf("the %s provider is not configured on this server (%s)", name, r.configured())
	}
	u, ok := p.(Upstream)
	if !ok {
		return nil, fmt.Errorf("the %s provider cannot forward raw API calls", name)
	}
	return u, nil
}

// Forward implements Upstream: it holds the limiters' slots until the
// response's body is closed (a streamed response holds them while it
// streams).
func (l limited) Forward(ctx context.Context, path string, header http.Header, body []byte) (*http.Response, error) {
	u, ok := l.p.(Upstream)
	if !ok {
		return nil, fmt.Errorf("model provider %T cannot forward raw API calls", l.p)
	}
	for i, lim := range l.limiters {
		if err := lim.acquire(ctx); err != nil {
			l.release(i)
			return nil, err
		}
	}
	res, err := u.Forward(ctx, path, header, body)
	if err != nil {
		l.release(len(l.limiters))
		return nil, err
	}
	var once sync.Once
	res.Body = &releasingBody{ReadCloser: res.Body, release: func() { once.Do(func() { l.release(len(l.limiters)) }) }}
	return res, nil
}

// release gives back the slots of the first n limiters.
func (l limited) release(n int) {
	for _, held := range l.limiters[:n] {
		held.release()
	}
}

// releasingBody releases a call's slots when its body is closed.
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	defer b.release()
	return b.ReadCloser.Close()
}
