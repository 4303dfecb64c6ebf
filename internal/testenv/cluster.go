package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ClickHouseCluster starts n ClickHouse 18.16 servers as the replicas of one
// shard of a cluster named name, replicating through ZooKeeper zk, with
// distributed DDL (ON CLUSTER) enabled and macros shard=01, replica=r<i>;
// opts add to each server's configuration.
//
// A server's port is known only once it runs, so remote_servers comes from
// an include file written after all have started; the servers reload it, and
// ClickHouseCluster returns once each of them lists every replica.
func ClickHouseCluster(t testing.TB, zk *ZooKeeperServer, name string, n int, opts ...CHOption) []*ClickHouseServer {
	t.Helper()
	include := filepath.Join(t.TempDir(), "remote_servers.xml")
	if err := os.WriteFile(include, []byte("<yandex><hitcount_remote_servers></hitcount_remote_servers></yandex>"), 0o644); err != nil {
		t.Fatal(err)
	}
	extra := "<include_from>" + esc(include) + "</include_from>" +
		`<remote_servers incl="hitcount_remote_servers"/>` +
		"<distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>"
	var servers []*ClickHouseServer
	var replicas strings.Builder
	for i := 1; i <= n; i++ {
		s := ClickHouse(t, append([]CHOption{WithZooKeeper(zk.Addr()), WithMacros(map[string]string{"shard": "01", "replica": fmt.Sprintf("r%d", i)}), WithConfigXML(extra)}, opts...)...)
		servers = append(servers, s)
		fmt.Fprintf(&replicas, "<replica><host>127.0.0.1</host><port>%d</port></replica>", s.tcpPort)
	}
	xml := fmt.Sprintf("<yandex><hitcount_remote_servers><%s><shard><internal_replication>true</internal_replication>%s</shard></%s></hitcount_remote_servers></yandex>",
		name, replicas.String(), name)
	if err := os.WriteFile(include, []byte(xml), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		conn := s.Conn(t)
		deadline := time.Now().Add(60 * time.Second)
		for {
			var got uint64
			err := conn.QueryRow(context.Background(), "SELECT count() FROM system.clusters WHERE cluster = ?", name).Scan(&got)
			if err == nil && got == uint64(n) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("clickhouse %s does not list cluster %s with %d replicas after 60 s (%d, %v)", s.Addr(), name, n, got, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return servers
}
