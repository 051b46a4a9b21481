package vault

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newKeyBytes(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, KeySize)
	rand.Read(b)
	return b
}

func TestSealOpen(t *testing.T) {
	k, err := NewKeyring(newKeyBytes(t))
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("s3cret-token-value")
	ct, err := k.Seal(secret, "vcrd_1")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ct, secret) {
		t.Fatal("ciphertext contains the plaintext")
	}
	ct2, _ := k.Seal(secret, "vcrd_1")
	if bytes.Equal(ct, ct2) {
		t.Fatal("two seals of the same plaintext are equal (nonce reuse)")
	}
	pt, err := k.Open(ct, "vcrd_1")
	if err != nil || !bytes.Equal(pt, secret) {
		t.Fatalf("Open = %q, %v", pt, err)
	}
	if _, err := k.Open(ct, "vcrd_2"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open under another credential id: %v, want ErrCorrupt", err)
	}
	bad := bytes.Clone(ct)
	bad[len(bad)-1] ^= 1
	if _, err := k.Open(bad, "vcrd_1"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("tampered: %v", err)
	}
	for _, short := range [][]byte{nil, {1}, ct[:header-1]} {
		if _, err := k.Open(short, "vcrd_1"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("short %x: %v", short, err)
		}
	}
}

func TestRotation(t *testing.T) {
	oldKey, newKey := newKeyBytes(t), newKeyBytes(t)
	old, _ := NewKeyring(oldKey)
	ct, _ := old.Seal([]byte("x"), "vcrd_1")

	other, _ := NewKeyring(newKey)
	if _, err := other.Open(ct, "vcrd_1"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("open without the old key: %v, want ErrUnknownKey", err)
	}
	rotated, err := NewKeyring(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	if !rotated.NeedsReseal(ct) {
		t.Fatal("old ciphertext does not need a reseal")
	}
	pt, err := rotated.Open(ct, "vcrd_1")
	if err != nil || string(pt) != "x" {
		t.Fatalf("open old ciphertext after rotation: %q, %v", pt, err)
	}
	ct2, _ := rotated.Seal(pt, "vcrd_1")
	if rotated.NeedsReseal(ct2) {
		t.Fatal("new ciphertext needs a reseal")
	}
	if rotated.KeyID() == old.KeyID() {
		t.Fatal("key ids of different keys are equal")
	}
}

func TestBadKeys(t *testing.T) {
	if _, err := NewKeyring(make([]byte, 16)); err == nil {
		t.Fatal("16-byte key accepted")
	}
	if _, err := LoadKey("not base64!", t.TempDir()); err == nil {
		t.Fatal("bad base64 accepted")
	}
	if _, err := LoadKey(base64.StdEncoding.EncodeToString(make([]byte, 31)), t.TempDir()); err == nil || !strings.Contains(err.Error(), "32 bytes") {
		t.Fatalf("short env key: %v", err)
	}
}

func TestLoadKeyFromEnv(t *testing.T) {
	want := newKeyBytes(t)
	dir := t.TempDir()
	got, err := LoadKey(base64.StdEncoding.EncodeToString(want), dir)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("LoadKey = %x, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, KeyFile)); !os.IsNotExist(err) {
		t.Fatalf("a key file was written although the env key was set: %v", err)
	}
}

func TestLoadKeyGenerated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	k1, err := LoadKey("", dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	k2, err := LoadKey("", dir)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("second load gave another key: %v", err)
	}
}

func TestSecrets(t *testing.T) {
	k, _ := NewKeyring(newKeyBytes(t))
	in := Secrets{AccessToken: "at", RefreshToken: "rt", ClientSecret: "cs"}
	ct, err := k.SealSecrets(in, "vcrd_9")
	if err != nil {
		t.Fatal(err)
	}
	out, err := k.OpenSecrets(ct, "vcrd_9")
	if err != nil || out != in {
		t.Fatalf("OpenSecrets = %+v, %v", out, err)
	}
}
