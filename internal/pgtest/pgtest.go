// Package pgtest gives tests a fresh PostgreSQL database on the server
// named by REINS_TEST_POSTGRES (default: the local server, trust auth).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
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
	dsn, drop, err := NewDB(ctx, ServerDSN(), "reins_test_")
	if err != nil {
		t.Fatalf("%v (set REINS_TEST_POSTGRES or start the server)", err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Error(err)
		}
	})
	return dsn
}

// NewDB creates an empty database named prefix and a random suffix on the
// server at admin, and returns its DSN and a function that drops it (for
// the benchmarks, and FreshDB).
func NewDB(ctx context.Context, admin, prefix string) (dsn string, drop func() error, err error) {
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("the PostgreSQL server must be a postgres:// URL, got %q", admin)
	}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, fmt.Errorf("PostgreSQL unreachable at %s: %w", u.Redacted(), err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// TerminateBackends ends the connections to dsn's database but the
// caller's own (pg_terminate_backend: SQLSTATE 57P01 to their clients),
// as an administrator or a failover would, and returns how many it ended.
// With spareListeners, the connections whose last statement was a LISTEN
// are left alone.
func TerminateBackends(ctx context.Context, dsn string, spareListeners bool) (int, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return 0, err
	}
	conn, err := pgx.Connect(ctx, ServerDSN())
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid() AND NOT ($2 AND query LIKE 'LISTEN %')`,
		strings.TrimPrefix(u.Path, "/"), spareListeners).Scan(&n)
	return n, err
}
