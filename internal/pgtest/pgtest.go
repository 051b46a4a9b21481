// Package pgtest gives tests a fresh PostgreSQL database on the server
// named by REINS_TEST_POSTGRES (default: the local server, trust auth).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ServerDSN is the server the tests use: REINS_TEST_POSTGRES, or the local
// one.
func ServerDSN() string {
	if dsn := os.Getenv("REINS_TEST_POSTGRES"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// FreshDB creates an empty database for the test, dropped when it ends, and
// returns its DSN. An unreachable server fails the test: these tests are
// never skipped.
func FreshDB(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin := ServerDSN()
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("REINS_TEST_POSTGRES must be a postgres:// URL, got %q", admin)
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("PostgreSQL unreachable at %s (set REINS_TEST_POSTGRES or start the server): %v", admin, err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	rand.Read(b[:])
	name := "reins_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}
