package testenv

import "testing"

func TestInsertValuesRE(t *testing.T) {
	for sql, want := range map[string]bool{
		"INSERT INTO t VALUES (1)":               true,
		"  insert into db.t (a, b) values (1,2)": true,
		"INSERT INTO t (a) SELECT 1":             false,
		"INSERT INTO t SELECT * FROM values_src": false,
		"CREATE TABLE t (a UInt8) ENGINE = Log":  false,
	} {
		if got := insertValuesRE.MatchString(sql); got != want {
			t.Errorf("%q: got %v, want %v", sql, got, want)
		}
	}
}
