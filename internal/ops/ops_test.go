package ops_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/ids"
	"github.com/reinsdev/reins/internal/ops"
	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/postgres"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/vault"
	ma "github.com/reinsdev/reins/managedagents"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newDataDir makes a data dir with a master key file and a database that
// recorded the key's id, as a server's first start leaves them.
func newDataDir(t *testing.T) (dir string, key []byte, st *sqlite.Store) {
	t.Helper()
	ctx := context.Background()
	dir = t.TempDir()
	key, err := vault.LoadKey("", dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err = sqlite.Open(ctx, filepath.Join(dir, app.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.ClaimSetting(ctx, "vault_key_id", keyID(t, key)); err != nil {
		t.Fatal(err)
	}
	return dir, key, st
}

func keyID(t *testing.T, raw []byte) string {
	t.Helper()
	k, err := vault.NewKeyring(raw)
	if err != nil {
		t.Fatal(err)
	}
	return k.KeyID()
}

func TestBackupAndRestoreChecks(t *testing.T) {
	ctx := context.Background()
	src, key, st := newDataDir(t)
	if err := st.CreateAPIKey(ctx, store.APIKey{ID: "key_1", Hash: "h1"}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "reins.backup")
	var steps int
	snap, err := ops.Backup(ctx, src, file, "test", sqlite.BackupOptions{StepPages: 2, Progress: func(copied, total int) {
		steps++
		if copied > total || total == 0 {
			t.Errorf("progress %d/%d", copied, total)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if steps < 2 || snap.Pages < 4 || snap.VaultKeyID != keyID(t, key) || snap.SchemaVersion != sqlite.SchemaVersion() {
		t.Fatalf("snapshot %+v after %d steps", snap, steps)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, %v", fi, err)
	}
	if _, err := ops.Backup(ctx, src, file, "test", sqlite.BackupOptions{}); err == nil {
		t.Fatal("a backup overwrote an existing file")
	}

	// No key, then another key: refused, naming the backup's key id.
	dst := t.TempDir()
	_, err = ops.Restore(ctx, file, dst, "", false)
	if err == nil || !strings.Contains(err.Error(), keyID(t, key)) || !strings.Contains(err.Error(), "has no master key") {
		t.Fatalf("restore without a key: %v", err)
	}
	other, _ := vault.GenerateKey()
	_, err = ops.Restore(ctx, file, dst, encode(other), false)
	if err == nil || !strings.Contains(err.Error(), keyID(t, key)) || !strings.Contains(err.Error(), keyID(t, other)) {
		t.Fatalf("restore with another key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst, app.DBFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused restore left a database: %v", err)
	}

	// The right key in the data dir: restored, without the manifest.
	if err := vault.WriteKeyFile(filepath.Join(dst, vault.KeyFile), key); err != nil {
		t.Fatal(err)
	}
	r, err := ops.Restore(ctx, file, dst, "", false)
	if err != nil || r.VaultKeyID != keyID(t, key) || r.Replaced != "" {
		t.Fatalf("restore = %+v, %v", r, err)
	}
	restored := openAt(t, dst)
	if _, err := restored.APIKeyByHash(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	restored.Close()
	if n := count(t, filepath.Join(dst, app.DBFile), `SELECT count(*) FROM sqlite_master WHERE name = 'reins_backup'`); n != 0 {
		t.Fatal("the restored database kept the backup's manifest")
	}

	// An existing database is replaced only when asked, and kept aside.
	if _, err := ops.Restore(ctx, file, dst, "", false); err == nil || !strings.Contains(err.Error(), "--replace") {
		t.Fatalf("restore over a database: %v", err)
	}
	r, err = ops.Restore(ctx, file, dst, "", true)
	if err != nil || r.Replaced == "" {
		t.Fatalf("restore --replace = %+v, %v", r, err)
	}
	if _, err := os.Stat(r.Replaced); err != nil {
		t.Fatalf("the replaced database was not kept: %v", err)
	}

	// Not while a server holds the data dir.
	lock, err := app.LockDataDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Restore(ctx, file, dst, "", true); !errors.Is(err, app.ErrDataDirInUse) {
		t.Fatalf("restore into a data dir in use: %v", err)
	}
	lock.Release()
}

func TestRestoreRefusesBadFiles(t *testing.T) {
	ctx := context.Background()
	src, key, _ := newDataDir(t)
	file := filepath.Join(t.TempDir(), "reins.backup")
	if _, err := ops.Backup(ctx, src, file, "test", sqlite.BackupOptions{}); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := vault.WriteKeyFile(filepath.Join(dst, vault.KeyFile), key); err != nil {
		t.Fatal(err)
	}

	// A schema newer than this binary's.
	newer := filepath.Join(t.TempDir(), "newer.backup")
	copyFile(t, file, newer)
	exec(t, newer, `UPDATE reins_backup SET value = ? WHERE name = 'schema_version'`, fmt.Sprint(sqlite.SchemaVersion()+3))
	_, err := ops.Restore(ctx, newer, dst, "", false)
	if want := fmt.Sprintf("version %d, newer than this reins binary knows (version %d)", sqlite.SchemaVersion()+3, sqlite.SchemaVersion()); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("restore of a newer schema: %v, want %q", err, want)
	}

	// A database that is not a backup.
	if _, err := ops.Restore(ctx, filepath.Join(src, app.DBFile), dst, "", false); err == nil || !strings.Contains(err.Error(), "not a reins backup") {
		t.Fatalf("restore of a plain database: %v", err)
	}

	// A damaged file.
	damaged := filepath.Join(t.TempDir(), "damaged.backup")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for i := 4096; i < len(b); i += 4096 { // the b-tree header of every page but the first
		copy(b[i:i+8], strings.Repeat("\xff", 8))
	}
	if err := os.WriteFile(damaged, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ops.Restore(ctx, damaged, dst, "", false); err == nil || !strings.Contains(err.Error(), "malformed") && !strings.Contains(err.Error(), "integrity check") {
		t.Fatalf("restore of a damaged backup: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst, app.DBFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused restore left a database: %v", err)
	}
}

// TestRotateMasterKey: every sealed secret (credentials, repository
// tokens, egress CA keys) opens under the new key and not the old one,
// the new key is installed and the old one kept, and the database records
// the new id.
func TestRotateMasterKey(t *testing.T) {
	ctx := context.Background()
	dir, oldKey, st := newDataDir(t)
	old, _ := vault.NewKeyring(oldKey)
	credID := seedSecrets(t, st, old, dir)
	st.Close()

	r, err := ops.RotateMasterKey(ctx, ops.Rotation{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if r.Resealed != 2 || r.CAFiles != 1 || r.OldKeyID != old.KeyID() || r.NewKeyID == old.KeyID() || r.AlreadyDone {
		t.Fatalf("rotation %+v", r)
	}
	newKey, _, err := vault.ReadKey("", dir)
	if err != nil || keyID(t, newKey) != r.NewKeyID {
		t.Fatalf("installed key: %v", err)
	}
	b, err := os.ReadFile(r.OldKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := vault.ParseKey(string(b)); keyID(t, k) != old.KeyID() {
		t.Fatal("the old key was not kept")
	}
	if _, err := os.Stat(filepath.Join(dir, "master-key.next")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("master-key.next left behind: %v", err)
	}
	checkSealedUnder(t, dir, credID, newKey, oldKey)
}

// TestRotateMasterKeyFromEnvironment: a key from REINS_MASTER_KEY is
// replaced by REINS_NEW_MASTER_KEY, which is then required.
func TestRotateMasterKeyFromEnvironment(t *testing.T) {
	ctx := context.Background()
	dir, oldKey, st := newDataDir(t)
	os.Remove(filepath.Join(dir, vault.KeyFile)) // the key is the environment's
	old, _ := vault.NewKeyring(oldKey)
	credID := seedSecrets(t, st, old, dir)
	st.Close()

	_, err := ops.RotateMasterKey(ctx, ops.Rotation{DataDir: dir, CurrentEnv: encode(oldKey)})
	if err == nil || !strings.Contains(err.Error(), ops.NewKeyEnv) {
		t.Fatalf("rotation without %s: %v", ops.NewKeyEnv, err)
	}
	newKey, _ := vault.GenerateKey()
	rot := ops.Rotation{DataDir: dir, CurrentEnv: encode(oldKey), NewEnv: encode(newKey)}
	r, err := ops.RotateMasterKey(ctx, rot)
	if err != nil || r.Resealed != 2 || r.KeyFile != "" {
		t.Fatalf("rotation = %+v, %v", r, err)
	}
	checkSealedUnder(t, dir, credID, newKey, oldKey)
	// Run again (as after an interruption past the commit): nothing more
	// to reseal.
	r, err = ops.RotateMasterKey(ctx, rot)
	if err != nil || !r.AlreadyDone || r.Resealed != 0 {
		t.Fatalf("second run = %+v, %v", r, err)
	}
	// A third key is refused: the database is under neither.
	third, _ := vault.GenerateKey()
	if _, err := ops.RotateMasterKey(ctx, ops.Rotation{DataDir: dir, CurrentEnv: encode(third), NewEnv: encode(oldKey)}); err == nil {
		t.Fatal("a rotation from a key the database is not sealed under succeeded")
	}
}

// secretStore is what seedSecrets and checkSealedUnder need of a store.
type secretStore interface {
	store.Vaults
	store.RepositoryTokens
	store.Replicas
	Close() error
}

// seedSecrets stores a credential and a repository token sealed under
// keys, and an egress CA file in dir; it returns the credential's id.
func seedSecrets(t *testing.T, st secretStore, keys *vault.Keyring, dir string) string {
	t.Helper()
	ctx := context.Background()
	ts := ma.Time(time.Now())
	v := ma.Vault{ID: ids.New(ids.Vault), Type: "vault", DisplayName: "v", Metadata: ma.Metadata{}, CreatedAt: ts, UpdatedAt: ts}
	if err := st.CreateVault(ctx, v); err != nil {
		t.Fatal(err)
	}
	c := store.Credential{Credential: ma.Credential{ID: ids.New(ids.Credential), Type: "vault_credential", VaultID: v.ID, Metadata: ma.Metadata{},
		Auth: ma.CredentialAuth{Type: ma.AuthStaticBearer, MCPServerURL: "https://mcp.example/"}, CreatedAt: ts, UpdatedAt: ts}}
	var err error
	if c.Sealed, err = keys.SealSecrets(vault.Secrets{Token: "tok-1"}, c.ID); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateCredential(ctx, c); err != nil {
		t.Fatal(err)
	}
	sealed, err := keys.Seal([]byte("repo-token"), sessions.RepositoryTokenAD("sesn_1", "res_1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetRepositoryToken(ctx, "sesn_1", "res_1", sealed); err != nil {
		t.Fatal(err)
	}
	caKey, err := keys.Seal([]byte("ca private key"), "ca:env_1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"cert_pem": "CERT", "sealed_key": caKey})
	if err := os.MkdirAll(filepath.Join(dir, "ca"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca", "env_1.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// checkSealedUnder checks that the secrets seedSecrets stored open under
// newKey, keep their values, and do not open under oldKey.
func checkSealedUnder(t *testing.T, dir, credID string, newKey, oldKey []byte) {
	t.Helper()
	st := openAt(t, dir)
	defer st.Close()
	checkStoreSealedUnder(t, st, credID, newKey, oldKey)
	checkCAFileSealedUnder(t, dir, newKey, oldKey)
}

// checkStoreSealedUnder checks the store's part of checkSealedUnder.
func checkStoreSealedUnder(t *testing.T, st secretStore, credID string, newKey, oldKey []byte) {
	t.Helper()
	ctx := context.Background()
	nk, _ := vault.NewKeyring(newKey)
	ok, _ := vault.NewKeyring(oldKey)
	if id, err := st.ClaimSetting(ctx, "vault_key_id", "x"); err != nil || id != nk.KeyID() {
		t.Fatalf("recorded key id %s, %v; want %s", id, err, nk.KeyID())
	}
	vaults, err := st.ListVaults(ctx, store.ListQuery{Limit: 10})
	if err != nil || len(vaults) != 1 {
		t.Fatalf("vaults %v, %v", vaults, err)
	}
	c, err := st.GetCredential(ctx, vaults[0].Value.ID, credID)
	if err != nil {
		t.Fatal(err)
	}
	if sec, err := nk.OpenSecrets(c.Sealed, c.ID); err != nil || sec.Token != "tok-1" {
		t.Fatalf("credential under the new key: %+v, %v", sec, err)
	}
	if _, err := ok.OpenSecrets(c.Sealed, c.ID); !errors.Is(err, vault.ErrUnknownKey) {
		t.Fatalf("the old key opens the credential: %v", err)
	}
	toks, err := st.RepositoryTokens(ctx, "sesn_1")
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := nk.Open(toks["res_1"], sessions.RepositoryTokenAD("sesn_1", "res_1")); err != nil || string(pt) != "repo-token" {
		t.Fatalf("repository token under the new key: %q, %v", pt, err)
	}
}

// checkCAFileSealedUnder checks the data dir's part of checkSealedUnder.
func checkCAFileSealedUnder(t *testing.T, dir string, newKey, oldKey []byte) {
	t.Helper()
	nk, _ := vault.NewKeyring(newKey)
	ok, _ := vault.NewKeyring(oldKey)
	b, err := os.ReadFile(filepath.Join(dir, "ca", "env_1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		SealedKey []byte `json:"sealed_key"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if pt, err := nk.Open(f.SealedKey, "ca:env_1"); err != nil || string(pt) != "ca private key" {
		t.Fatalf("CA key under the new key: %q, %v", pt, err)
	}
	if _, err := ok.Open(f.SealedKey, "ca:env_1"); err == nil {
		t.Fatal("the old key opens the CA key")
	}
}

func openAt(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, app.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// encode is a key as REINS_MASTER_KEY holds it.
func encode(raw []byte) string { return base64.StdEncoding.EncodeToString(raw) }

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func exec(t *testing.T, path, q string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, path, q string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRotateMasterKeyPostgres: the rotation of a PostgreSQL store, run
// from two replicas' data dirs with the same keys: the first reseals the
// database, the second only its own CA file.
func TestRotateMasterKeyPostgres(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.FreshDB(t)
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	oldKey, _ := vault.GenerateKey()
	old, _ := vault.NewKeyring(oldKey)
	if _, err := st.ClaimSetting(ctx, "vault_key_id", old.KeyID()); err != nil {
		t.Fatal(err)
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	credID := seedSecrets(t, st, old, dirA)
	caKey, _ := old.Seal([]byte("ca private key"), "ca:env_1")
	b, _ := json.Marshal(map[string]any{"cert_pem": "CERT", "sealed_key": caKey})
	os.MkdirAll(filepath.Join(dirB, "ca"), 0o700)
	if err := os.WriteFile(filepath.Join(dirB, "ca", "env_1.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}

	newKey, _ := vault.GenerateKey()
	rot := ops.Rotation{DatabaseURL: dsn, DataDir: dirA, CurrentEnv: encode(oldKey), NewEnv: encode(newKey)}
	r, err := ops.RotateMasterKey(ctx, rot)
	if err != nil || r.Resealed != 2 || r.CAFiles != 1 || r.AlreadyDone {
		t.Fatalf("rotation from replica a = %+v, %v", r, err)
	}
	rot.DataDir = dirB
	r, err = ops.RotateMasterKey(ctx, rot)
	if err != nil || r.Resealed != 0 || r.CAFiles != 1 || !r.AlreadyDone {
		t.Fatalf("rotation from replica b = %+v, %v", r, err)
	}
	checkStoreSealedUnder(t, st, credID, newKey, oldKey)
	checkCAFileSealedUnder(t, dirA, newKey, oldKey)
	checkCAFileSealedUnder(t, dirB, newKey, oldKey)
}
