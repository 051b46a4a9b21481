package sqlstore

import (
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Migration is one step of a dialect's schema: a file NNNN_name.sql.
type Migration struct {
	Version int
	Name    string // the file name
	SQL     string
}

// Migrations reads the *.sql files of fsys's directory dir in version
// order. How they are applied (and recorded) is the driver's business.
func Migrations(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]Migration, 0, len(names))
	for _, name := range names {
		base := strings.TrimPrefix(name, dir+"/")
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: bad version prefix", base)
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: base, SQL: string(body)})
	}
	return out, nil
}
