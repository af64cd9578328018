package main

import "testing"

func TestWithPoolSizeKeepsTheOperatorsChoice(t *testing.T) {
	cases := []struct{ in, want string }{
		{"postgres://u@h:5432/db?sslmode=disable", "postgres://u@h:5432/db?pool_max_conns=6&sslmode=disable"},
		{"postgresql://u@h/db", "postgresql://u@h/db?pool_max_conns=6"},
		{"postgres://u@h/db?pool_max_conns=2", "postgres://u@h/db?pool_max_conns=2"},
		{"host=h dbname=db", "host=h dbname=db pool_max_conns=6"},
		{"host=h dbname=db pool_max_conns=3", "host=h dbname=db pool_max_conns=3"},
	}
	for _, c := range cases {
		if got := withPoolSize(c.in, 6); got != c.want {
			t.Errorf("withPoolSize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
