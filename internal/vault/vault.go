// Package vault encrypts credential secrets at rest.
//
// A Keyring seals secrets with AES-256-GCM under a 32-byte master key. Every
// ciphertext starts with a format byte and the id of the key that sealed it,
// so a keyring holding an old and a new key can open both while sealing only
// under the new one (key rotation). The credential id is bound to the
// ciphertext as additional data: a blob copied onto another credential does
// not open.
package vault

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the size of a master key in bytes.
const KeySize = 32

// EnvKey is the environment variable that holds a base64 master key.
const EnvKey = "REINS_MASTER_KEY"

// KeyFile is the name of the generated master key file in the data dir.
const KeyFile = "master-key"

const (
	format1   = 1 // [format][key id: 8][nonce: 12][ciphertext+tag]
	keyIDSize = 8
	nonceSize = 12
	header    = 1 + keyIDSize + nonceSize
)

// Errors of Open; match them with errors.Is.
var (
	// ErrUnknownKey: the ciphertext was sealed under a key the keyring
	// does not hold.
	ErrUnknownKey = errors.New("vault: sealed under an unknown key")
	// ErrCorrupt: the ciphertext is malformed, was tampered with, or
	// belongs to another credential.
	ErrCorrupt = errors.New("vault: ciphertext does not authenticate")
)

type key struct {
	id   [keyIDSize]byte
	aead cipher.AEAD
}

// Keyring seals under its primary key and opens under any of its keys. It
// is safe for concurrent use.
type Keyring struct {
	primary key
	keys    map[[keyIDSize]byte]cipher.AEAD
}

// NewKeyring returns a keyring that seals under primary and also opens
// what older keys sealed.
func NewKeyring(primary []byte, older ...[]byte) (*Keyring, error) {
	k := &Keyring{keys: map[[keyIDSize]byte]cipher.AEAD{}}
	for i, raw := range append([][]byte{primary}, older...) {
		kk, err := newKey(raw)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			k.primary = kk
		}
		k.keys[kk.id] = kk.aead
	}
	return k, nil
}

func newKey(raw []byte) (key, error) {
	if len(raw) != KeySize {
		return key{}, fmt.Errorf("vault: a master key is %d bytes, got %d", KeySize, len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return key{}, fmt.Errorf("vault: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, fmt.Errorf("vault: %w", err)
	}
	var k key
	sum := sha256.Sum256(append([]byte("reins vault key id\x00"), raw...))
	copy(k.id[:], sum[:])
	k.aead = aead
	return k, nil
}

// KeyID returns the id of the primary key (hex), which is not secret.
func (k *Keyring) KeyID() string { return fmt.Sprintf("%x", k.primary.id) }

// Seal encrypts plaintext for the credential id.
func (k *Keyring) Seal(plaintext []byte, credentialID string) ([]byte, error) {
	out := make([]byte, header, header+len(plaintext)+k.primary.aead.Overhead())
	out[0] = format1
	copy(out[1:], k.primary.id[:])
	if _, err := rand.Read(out[1+keyIDSize : header]); err != nil {
		return nil, fmt.Errorf("vault: nonce: %w", err)
	}
	return k.primary.aead.Seal(out, out[1+keyIDSize:header], plaintext, ad(out[:1+keyIDSize], credentialID)), nil
}

// Open decrypts what Seal returned for the same credential id.
func (k *Keyring) Open(ciphertext []byte, credentialID string) ([]byte, error) {
	if len(ciphertext) < header || ciphertext[0] != format1 {
		return nil, ErrCorrupt
	}
	var id [keyIDSize]byte
	copy(id[:], ciphertext[1:])
	aead, ok := k.keys[id]
	if !ok {
		return nil, fmt.Errorf("%w %x", ErrUnknownKey, id)
	}
	pt, err := aead.Open(nil, ciphertext[1+keyIDSize:header], ciphertext[header:], ad(ciphertext[:1+keyIDSize], credentialID))
	if err != nil {
		return nil, ErrCorrupt
	}
	return pt, nil
}

// NeedsReseal reports whether ciphertext was sealed under a key other than
// the primary one (a rotation can then re-seal it).
func (k *Keyring) NeedsReseal(ciphertext []byte) bool {
	return len(ciphertext) < header || !bytes.Equal(ciphertext[1:1+keyIDSize], k.primary.id[:])
}

func ad(prefix []byte, credentialID string) []byte {
	return append(append([]byte{}, prefix...), credentialID...)
}

// LoadKey returns the master key: envValue (the base64 value of
// REINS_MASTER_KEY) when it is not empty, else the key in dataDir/master-key,
// which is generated (mode 0600) when it does not exist.
func LoadKey(envValue, dataDir string) ([]byte, error) {
	raw, _, err := ReadKey(envValue, dataDir)
	if !errors.Is(err, fs.ErrNotExist) {
		return raw, err
	}
	raw, err = GenerateKey()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("vault: %w", err)
	}
	path := filepath.Join(dataDir, KeyFile)
	err = WriteKeyFile(path, raw)
	if errors.Is(err, fs.ErrExist) {
		// Another process starting at once wrote its key first.
		return LoadKey("", dataDir)
	}
	if err != nil {
		return nil, err
	}
	return raw, nil
}

// ReadKey returns the master key as LoadKey does, and where it came from
// (EnvKey or the key file's path), but never generates one: without
// envValue and the key file, the error matches fs.ErrNotExist.
func ReadKey(envValue, dataDir string) (raw []byte, source string, err error) {
	if envValue != "" {
		raw, err := ParseKey(envValue)
		if err != nil {
			return nil, EnvKey, fmt.Errorf("vault: %s: %w", EnvKey, err)
		}
		return raw, EnvKey, nil
	}
	path := filepath.Join(dataDir, KeyFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, path, fmt.Errorf("vault: %w", err)
	}
	raw, err = ParseKey(string(b))
	if err != nil {
		return nil, path, fmt.Errorf("vault: %s: %w", path, err)
	}
	return raw, path, nil
}

// GenerateKey returns a new random master key.
func GenerateKey() ([]byte, error) {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("vault: generate key: %w", err)
	}
	return raw, nil
}

// WriteKeyFile writes raw, base64, to the new file path (mode 0600) and
// syncs it. It fails, matching fs.ErrExist, when path exists: two
// processes cannot both write a key there.
func WriteKeyFile(path string, raw []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("vault: %w", err)
	}
	_, werr := f.WriteString(base64.StdEncoding.EncodeToString(raw) + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(path)
		return fmt.Errorf("vault: write %s: %w", path, err)
	}
	return nil
}

// ParseKey decodes a master key from its base64 form (the value of
// REINS_MASTER_KEY or the content of a key file).
func ParseKey(s string) ([]byte, error) { return decodeKey(s) }

func decodeKey(s string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, errors.New("not valid base64")
	}
	if len(raw) != KeySize {
		return nil, fmt.Errorf("must decode to %d bytes, got %d", KeySize, len(raw))
	}
	return raw, nil
}
