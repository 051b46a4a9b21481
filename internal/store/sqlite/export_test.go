package sqlite

// SynchronousLevel reads the writer connection's synchronous pragma.
func SynchronousLevel(s *Store) (int, error) {
	var n int
	err := s.d.w.QueryRow(`PRAGMA synchronous`).Scan(&n)
	return n, err
}
