package toolhost

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/reinsdev/reins/internal/vault"
	"github.com/reinsdev/reins/sandbox/egress"
)

// caStore keeps one CA per environment for the egress proxies that
// substitute credentials in HTTPS requests. A CA's key is sealed with
// the vault keyring like every other secret, and never enters a sandbox.
type caStore struct {
	dir  string
	keys *vault.Keyring

	mu  sync.Mutex // guards cas
	cas map[string]*egress.CA
}

// caFile is a CA on disk.
type caFile struct {
	CertPEM   string `json:"cert_pem"`
	SealedKey []byte `json:"sealed_key"`
}

// get returns the environment's CA, making it on first use.
func (c *caStore) get(envID string) (*egress.CA, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ca := c.cas[envID]; ca != nil {
		return ca, nil
	}
	if c.keys == nil || !safeName(envID) {
		return nil, errors.New("no CA can be kept for environment " + envID)
	}
	path := filepath.Join(c.dir, envID+".json")
	ca, err := c.load(path, envID)
	if errors.Is(err, fs.ErrNotExist) {
		ca, err = c.create(path, envID)
	}
	if err != nil {
		return nil, fmt.Errorf("egress CA of %s: %w", envID, err)
	}
	c.cas[envID] = ca
	return ca, nil
}

func (c *caStore) load(path, envID string) (*egress.CA, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f caFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	key, err := c.keys.Open(f.SealedKey, "ca:"+envID)
	if err != nil {
		return nil, err
	}
	return egress.LoadCA([]byte(f.CertPEM), key)
}

func (c *caStore) create(path, envID string) (*egress.CA, error) {
	ca, err := egress.NewCA("reins egress " + envID)
	if err != nil {
		return nil, err
	}
	key, err := ca.MarshalKey()
	if err != nil {
		return nil, err
	}
	sealed, err := c.keys.Seal(key, "ca:"+envID)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(caFile{CertPEM: string(ca.CertPEM()), SealedKey: sealed})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return nil, err
	}
	return ca, os.Rename(tmp, path)
}
