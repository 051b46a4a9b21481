package sqlite_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/reinsdev/reins/internal/store/internal/sqlstore"
	"github.com/reinsdev/reins/internal/store/sqlite"
)

// TestStatementsPreparedOnce: a statement the writer or a reader runs
// again runs prepared: repeating it prepares nothing more, and what it
// writes and reads is right.
func TestStatementsPreparedOnce(t *testing.T) {
	s, _ := writerStore(t)
	ctx := context.Background()
	count := func() (n int) {
		t.Helper()
		if err := sqlite.Reader(s).QueryRow(ctx, `SELECT count(*) FROM settings WHERE name LIKE 'k%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range 3 { // the first write notes its statement, the writer prepares it after the batch
		if err := sqlite.WithTx(ctx, s, setting(fmt.Sprintf("k%d", i))); err != nil {
			t.Fatal(err)
		}
		count()
	}
	wk, wp, rk, rp := sqlite.StatementCounts(s)
	if wk == 0 || rk == 0 {
		t.Fatalf("no statement kept: writer %d, readers %d", wk, rk)
	}
	for i := 3; i < 50; i++ {
		if err := sqlite.WithTx(ctx, s, setting(fmt.Sprintf("k%d", i))); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != i+1 {
			t.Fatalf("%d settings read after %d writes", n, i+1)
		}
	}
	if wk2, wp2, rk2, rp2 := sqlite.StatementCounts(s); wk2 != wk || wp2 != wp || rk2 != rk || rp2 != rp {
		t.Fatalf("repeated statements were prepared again: writer kept %d→%d prepared %d→%d, readers kept %d→%d prepared %d→%d",
			wk, wk2, wp, wp2, rk, rk2, rp, rp2)
	}
}

// TestStatementsPastTheBound: texts past the caches' bound run
// unprepared, and correctly.
func TestStatementsPastTheBound(t *testing.T) {
	s, _ := writerStore(t)
	ctx := context.Background()
	sqlite.LimitStatements(s, 2)
	for i := range 10 {
		// A distinct text each time, as a query built with a varying
		// number of placeholders would be.
		q := fmt.Sprintf(`INSERT INTO settings (name, value) VALUES (?, '%d')`, i)
		if err := sqlite.WithTx(ctx, s, func(tx sqlstore.Querier) error {
			_, err := tx.Exec(ctx, q, fmt.Sprintf("b%d", i))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var v string
		if err := sqlite.Reader(s).QueryRow(ctx, fmt.Sprintf(`SELECT value FROM settings WHERE name = 'b%d'`, i)).Scan(&v); err != nil || v != fmt.Sprint(i) {
			t.Fatalf("setting b%d: %q %v", i, v, err)
		}
	}
	if wk, _, rk, _ := sqlite.StatementCounts(s); wk > 2 || rk > 2 {
		t.Fatalf("caches past their bound: writer %d, readers %d", wk, rk)
	}
}
