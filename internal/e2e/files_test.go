package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/fakeanthropic"
	provider "github.com/reinsdev/reins/internal/model/anthropic"
)

// TestFilesAPI drives /v1/files with the official Go SDK: upload, get,
// list (cursor, ids), download byte for byte, delete, and the refusals.
func TestFilesAPI(t *testing.T) {
	s := startWith(t, options{}, func(c *app.Config) { c.HTTP.MaxFileSize = 3 << 20 })
	ctx := context.Background()
	content := make([]byte, 2<<20+12345) // three pieces of storage
	rand.Read(content)
	up, err := s.client.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{
		File: anthropic.File(bytes.NewReader(content), "dir/data.bin", "application/octet-stream"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(up.ID, "file_") || up.Filename != "data.bin" || up.SizeBytes != int64(len(content)) || !up.Downloadable || up.Type != "file" || up.CreatedAt.IsZero() {
		t.Fatalf("uploaded %s", up.RawJSON())
	}
	txt, err := s.client.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{
		File:             anthropic.File(strings.NewReader("hello, reins\n"), "notes.txt", ""),
		ExpiresInSeconds: anthropic.Int(3600),
	})
	if err != nil {
		t.Fatal(err)
	}
	if txt.MimeType != "text/plain" || txt.ExpiresAt.IsZero() {
		t.Fatalf("text upload %s", txt.RawJSON())
	}

	got, err := s.client.Beta.Files.GetMetadata(ctx, up.ID, anthropic.BetaFileGetMetadataParams{})
	if err != nil || got.ID != up.ID || got.SizeBytes != up.SizeBytes {
		t.Fatalf("get: %v %v", got, err)
	}
	page, err := s.client.Beta.Files.List(ctx, anthropic.BetaFileListParams{Limit: anthropic.Int(1)})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != txt.ID || page.NextPage == "" {
		t.Fatalf("first page (newest first): %+v %v", page, err)
	}
	var all []string
	for it := s.client.Beta.Files.ListAutoPaging(ctx, anthropic.BetaFileListParams{Limit: anthropic.Int(1)}); it.Next(); {
		all = append(all, it.Current().ID)
	}
	if len(all) != 2 || all[1] != up.ID {
		t.Fatalf("paging: %v", all)
	}
	byID, err := s.client.Beta.Files.List(ctx, anthropic.BetaFileListParams{IDs: []string{up.ID, "file_missing"}})
	if err != nil || len(byID.Data) != 1 || byID.Data[0].ID != up.ID {
		t.Fatalf("ids filter: %+v %v", byID, err)
	}

	res, err := s.client.Beta.Files.Download(ctx, up.ID, anthropic.BetaFileDownloadParams{})
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || !bytes.Equal(back, content) {
		t.Fatalf("download: %d bytes (%v), want the %d uploaded", len(back), err, len(content))
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Fatalf("download content type %q", ct)
	}
	res, err = s.client.Beta.Files.Download(ctx, txt.ID, anthropic.BetaFileDownloadParams{})
	if err != nil {
		t.Fatal(err)
	}
	back, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if string(back) != "hello, reins\n" || res.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("text download %q as %q", back, res.Header.Get("Content-Type"))
	}

	del, err := s.client.Beta.Files.Delete(ctx, up.ID, anthropic.BetaFileDeleteParams{})
	if err != nil || del.ID != up.ID || del.Type != "file_deleted" {
		t.Fatalf("delete: %+v %v", del, err)
	}
	_, err = s.client.Beta.Files.GetMetadata(ctx, up.ID, anthropic.BetaFileGetMetadataParams{})
	apiErr(t, err, http.StatusNotFound, "not_found_error")
	_, err = s.client.Beta.Files.Download(ctx, up.ID, anthropic.BetaFileDownloadParams{})
	apiErr(t, err, http.StatusNotFound, "not_found_error")
	_, err = s.client.Beta.Files.Delete(ctx, up.ID, anthropic.BetaFileDeleteParams{})
	apiErr(t, err, http.StatusNotFound, "not_found_error")

	// Over --max-file-size: 413, and nothing stored.
	_, err = s.client.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{
		File: anthropic.File(bytes.NewReader(make([]byte, 3<<20+1)), "big.bin", "application/octet-stream"),
	})
	apiErr(t, err, http.StatusRequestEntityTooLarge, "request_too_large")
	_, err = s.client.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{
		File:             anthropic.File(strings.NewReader("x"), "x.txt", "text/plain"),
		ExpiresInSeconds: anthropic.Int(5),
	})
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error")
	left, err := s.client.Beta.Files.List(ctx, anthropic.BetaFileListParams{})
	if err != nil || len(left.Data) != 1 {
		t.Fatalf("after the refusals: %+v %v", left, err)
	}
}

// TestFileSourcesReachTheModel: a user message's image and document
// blocks with file sources reach the Messages API inline (the image as
// base64, the text file as a text document); the event log keeps the file
// ids; an unknown file id is a 404.
func TestFileSourcesReachTheModel(t *testing.T) {
	s, fake := startWithFakeAnthropic(t)
	ctx := context.Background()
	// A 1x1 PNG.
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")
	img, err := s.client.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(bytes.NewReader(png), "dot.png", "image/png")})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := s.client.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader("the secret word is marmalade"), "word.txt", "text/plain")})
	if err != nil {
		t.Fatal(err)
	}
	a := s.newAgent(t, provider.DefaultModel)
	sess := s.newSession(t, a.ID, s.newEnv(t, "env").ID)
	message := func(imgID, docID string) anthropic.BetaManagedAgentsEventParamsUnion {
		return anthropic.BetaManagedAgentsEventParamsUnion{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{
				{OfImage: &anthropic.BetaManagedAgentsImageBlockParam{Source: anthropic.BetaManagedAgentsImageBlockSourceUnionParam{OfFile: &anthropic.BetaManagedAgentsFileImageSourceParam{FileID: imgID}}}},
				{OfDocument: &anthropic.BetaManagedAgentsDocumentBlockParam{Source: anthropic.BetaManagedAgentsDocumentBlockSourceUnionParam{OfFile: &anthropic.BetaManagedAgentsFileDocumentSourceParam{FileID: docID}}}},
				{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: "what is the word?"}},
			},
		}}
	}
	_, err = s.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{message(img.ID, "file_missing")}})
	apiErr(t, err, http.StatusNotFound, "not_found_error")
	_, err = s.client.Beta.Sessions.Events.Send(ctx, sess.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{message(doc.ID, doc.ID)}})
	apiErr(t, err, http.StatusBadRequest, "invalid_request_error") // a text file as an image

	fake.Push(fakeanthropic.Text("marmalade"))
	st := s.openStream(t, sess.ID)
	echo := s.send(t, sess.ID, message(img.ID, doc.ID))
	if !strings.Contains(string(echo[0].Content[1].Source), doc.ID) {
		t.Fatalf("echo lost the file id: %s", echo[0].Content[1].Source)
	}
	st.until(isIdle)
	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests", len(reqs))
	}
	raw := string(reqs[0].Raw)
	for _, want := range []string{`"media_type":"image/png"`, base64.StdEncoding.EncodeToString(png), `"data":"the secret word is marmalade"`} {
		if !strings.Contains(raw, want) {
			t.Fatalf("model request lacks %s: %s", want, raw)
		}
	}
	if strings.Contains(raw, "file_") {
		t.Fatalf("a file id reached the model: %s", raw)
	}
}
