// Package deploy holds no Go code: only the tests of the deployment artifacts
// beside them (systemd units, compose file, Dockerfile, Kubernetes manifest,
// ClickHouse snippets, SQL), each checked with the real tool where there is one.
package deploy

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/hitcount/hitcount/config"
	"github.com/hitcount/hitcount/internal/backend"
)

// requireTool returns the path of a command, or skips the test (fails it when
// CI is set, so CI cannot go green by skipping).
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("%s not found on PATH: run scripts/setup.sh to install it", name)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// repoRoot is the repository root: the parent of this package's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

// yamlFiles lists every .yaml and .yml file under deploy/.
func yamlFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(p); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// isHitcountConfig says whether a YAML file under deploy/ is a hitcount
// config: hitcount*.yaml anywhere but kubernetes/ (manifests embed theirs).
func isHitcountConfig(p string) bool {
	return strings.HasPrefix(filepath.Base(p), "hitcount") && !strings.HasPrefix(p, "kubernetes"+string(filepath.Separator))
}

// TestEveryYAMLIsChecked keeps new YAML files from going unchecked: each is a
// hitcount config, the compose file or a Kubernetes manifest.
func TestEveryYAMLIsChecked(t *testing.T) {
	for _, p := range yamlFiles(t) {
		switch {
		case isHitcountConfig(p):
		case p == filepath.Join("compose", "docker-compose.yml"):
		case strings.HasPrefix(p, "kubernetes"+string(filepath.Separator)):
		default:
			t.Errorf("%s: not checked by any test (a hitcount*.yaml config, compose/docker-compose.yml or kubernetes/*)", p)
		}
	}
}

// TestHitcountConfigs loads every hitcount config under deploy/ as the
// collector and the sweeper do, and checks that each has what they need.
func TestHitcountConfigs(t *testing.T) {
	var n int
	for _, p := range yamlFiles(t) {
		if !isHitcountConfig(p) {
			continue
		}
		n++
		cfg, err := config.Load(p)
		if err != nil {
			t.Errorf("%s does not load:\n%v", p, err)
			continue
		}
		if err := cfg.CheckCollector(); err != nil {
			t.Errorf("%s: not enough for the collector:\n%v", p, err)
		}
		if err := cfg.CheckSweeper(); err != nil {
			t.Errorf("%s: not enough for the sweeper:\n%v", p, err)
		}
	}
	if n < 2 {
		t.Errorf("found %d hitcount configs under deploy/, want at least hitcount.example.yaml and compose/hitcount.yaml", n)
	}
}

// TestCompose validates the compose file with docker-compose itself (no
// Docker engine needed), then checks what it mounts and how the services
// reach each other against the files beside it.
func TestCompose(t *testing.T) {
	bin := requireTool(t, "docker-compose")
	root := repoRoot(t)
	cmd := exec.Command(bin, "-f", "deploy/compose/docker-compose.yml", "config", "-q")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("docker-compose -f deploy/compose/docker-compose.yml config -q: %v\n%s", err, out)
	}

	// The resolved file: absolute bind-mount paths, interpolated variables.
	cmd = exec.Command(bin, "-f", "deploy/compose/docker-compose.yml", "config")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CLICKHOUSE_PASSWORD=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker-compose config: %v", err)
	}
	var compose struct {
		Services map[string]struct {
			Image       string   `yaml:"image"`
			Command     []string `yaml:"command"`
			NetworkMode string   `yaml:"network_mode"`
			Build       *struct {
				Context    string `yaml:"context"`
				Dockerfile string `yaml:"dockerfile"`
			} `yaml:"build"`
			Volumes []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(out, &compose); err != nil {
		t.Fatalf("docker-compose config output: %v", err)
	}
	for _, name := range []string{"clickhouse", "web", "collector", "sweeper", "mailpit"} {
		if _, ok := compose.Services[name]; !ok {
			t.Errorf("compose: no service %s", name)
		}
	}
	// Every bind mount names a file of the repository; the log volume is
	// shared by the web server and the collector.
	logMounts := map[string]string{}
	for name, svc := range compose.Services {
		for _, v := range svc.Volumes {
			src, rest, _ := strings.Cut(v, ":")
			if filepath.IsAbs(src) {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("compose: service %s mounts %s, which does not exist", name, src)
				}
			} else if src == "web-logs" {
				logMounts[name] = rest
			}
		}
		if svc.Build != nil {
			if _, err := os.Stat(filepath.Join(svc.Build.Context, svc.Build.Dockerfile)); err != nil {
				t.Errorf("compose: service %s builds from %s: %v", name, svc.Build.Dockerfile, err)
			}
		}
	}
	if logMounts["web"] == "" || logMounts["collector"] == "" {
		t.Errorf("compose: the volume web-logs must be mounted by web and collector, got %v", logMounts)
	}
	if c := compose.Services["clickhouse"].Image; c != "clickhouse/clickhouse-server:24.8" {
		t.Errorf("compose: clickhouse image %q", c)
	}
	for _, name := range []string{"collector", "sweeper"} {
		if cmd := compose.Services[name].Command; len(cmd) == 0 || filepath.Base(cmd[0]) != name {
			t.Errorf("compose: service %s runs %v", name, cmd)
		}
	}

	// The config of the stack points at the services as they are named and
	// configured here.
	cfg, err := config.Load(filepath.Join("compose", "hitcount.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range append(slices.Clone(cfg.ClickHouse.Addr), cfg.Keeper.Addr...) {
		host, _, _ := net.SplitHostPort(a)
		if _, ok := compose.Services[host]; !ok {
			t.Errorf("compose/hitcount.yaml: %s is not a service of the compose file", a)
		}
	}
	if cfg.Sweep.Claims != "keeper" || !slices.Equal(cfg.Keeper.Addr, []string{"clickhouse:" + keeperPort(t)}) {
		t.Errorf("compose/hitcount.yaml: sweeper claims %q on %v, want keeper on clickhouse:%s (clickhouse/keeper.xml)", cfg.Sweep.Claims, cfg.Keeper.Addr, keeperPort(t))
	}
	// smtp.tls none is only allowed to loopback: the sweeper must share the
	// mail catcher's network namespace.
	if cfg.SMTP == nil || cfg.SMTP.TLS == "none" && compose.Services["sweeper"].NetworkMode != "service:mailpit" {
		t.Errorf("compose: the sweeper sends without TLS to %v but is not in mailpit's network namespace", cfg.SMTP)
	}
	for _, s := range cfg.Sources {
		if !strings.HasPrefix(s.Path, strings.TrimSuffix(logMounts["collector"], ":ro")+"/") {
			t.Errorf("compose/hitcount.yaml: source %s is not in the log volume (mounted at %s)", s.Path, logMounts["collector"])
		}
	}
}

// keeperPort is the client port of deploy/clickhouse/keeper.xml.
func keeperPort(t *testing.T) string {
	t.Helper()
	var k struct {
		TCPPort string `xml:"keeper_server>tcp_port"`
	}
	readXML(t, filepath.Join("clickhouse", "keeper.xml"), &k)
	return k.TCPPort
}

func readXML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestXML checks that every XML file under deploy/ is well formed, and what
// the ClickHouse snippets and users-18.xml declare.
func TestXML(t *testing.T) {
	var files []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".xml" {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(bytes.NewReader(data))
		roots := 0
		depth := 0
		for {
			tok, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Errorf("%s is not well-formed XML: %v", p, err)
				break
			}
			switch tok.(type) {
			case xml.StartElement:
				if depth == 0 {
					roots++
				}
				depth++
			case xml.EndElement:
				depth--
			}
		}
		if roots != 1 {
			t.Errorf("%s: %d root elements, want 1", p, roots)
		}
	}

	var keeper struct {
		XMLName  xml.Name
		TCPPort  string `xml:"keeper_server>tcp_port"`
		ServerID string `xml:"keeper_server>server_id"`
		Raft     []struct {
			ID   string `xml:"id"`
			Port string `xml:"port"`
		} `xml:"keeper_server>raft_configuration>server"`
		ZooKeeper []struct {
			Port string `xml:"port"`
		} `xml:"zookeeper>node"`
	}
	readXML(t, filepath.Join("clickhouse", "keeper.xml"), &keeper)
	if keeper.XMLName.Local != "clickhouse" || keeper.TCPPort != "9181" || len(keeper.Raft) != 1 ||
		keeper.Raft[0].Port != "9234" || keeper.Raft[0].ID != keeper.ServerID {
		t.Errorf("keeper.xml: want <clickhouse>, one Keeper node on 9181, raft 9234; got %+v", keeper)
	}
	if len(keeper.ZooKeeper) != 1 || keeper.ZooKeeper[0].Port != keeper.TCPPort {
		t.Errorf("keeper.xml: the server's <zookeeper> must point at its own Keeper (%s), got %+v", keeper.TCPPort, keeper.ZooKeeper)
	}

	var km struct {
		Prefix string `xml:"keeper_map_path_prefix"`
	}
	readXML(t, filepath.Join("clickhouse", "keeper_map.xml"), &km)
	if km.Prefix != "/keeper_map_tables" {
		t.Errorf("keeper_map.xml: keeper_map_path_prefix %q", km.Prefix)
	}

	var cluster struct {
		Shards []struct {
			Internal string `xml:"internal_replication"`
			Replicas []struct {
				Host string `xml:"host"`
				Port string `xml:"port"`
			} `xml:"replica"`
		} `xml:"remote_servers>hitcount>shard"`
		Shard   string `xml:"macros>shard"`
		Replica string `xml:"macros>replica"`
	}
	readXML(t, filepath.Join("clickhouse", "cluster.xml"), &cluster)
	if len(cluster.Shards) != 1 || len(cluster.Shards[0].Replicas) != 2 || cluster.Shards[0].Internal != "true" ||
		cluster.Shard == "" || cluster.Replica == "" {
		t.Errorf("cluster.xml: want cluster hitcount with one shard of two replicas (internal_replication) and macros shard, replica; got %+v", cluster)
	}

	var users struct {
		XMLName xml.Name
		Users   struct {
			List []struct {
				XMLName   xml.Name
				Profile   string   `xml:"profile"`
				Databases []string `xml:"allow_databases>database"`
			} `xml:",any"`
		} `xml:"users"`
		Profiles struct {
			List []struct {
				XMLName  xml.Name
				Readonly string `xml:"readonly"`
			} `xml:",any"`
		} `xml:"profiles"`
	}
	readXML(t, filepath.Join("sql", "users-18.xml"), &users)
	readonly := map[string]string{}
	for _, p := range users.Profiles.List {
		readonly[p.XMLName.Local] = p.Readonly
	}
	got := map[string]string{}
	for _, u := range users.Users.List {
		got[u.XMLName.Local] = readonly[u.Profile]
		if !slices.Contains(u.Databases, "hitcount") {
			t.Errorf("users-18.xml: %s is not allowed database hitcount", u.XMLName.Local)
		}
	}
	if want := map[string]string{"collector": "0", "sweeper": "0", "analyst": "1"}; users.XMLName.Local != "yandex" || !mapsEqual(got, want) {
		t.Errorf("users-18.xml: users and their readonly = %v under <%s>, want %v under <yandex> (18.16)", got, users.XMLName.Local, want)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestDockerfile checks the image's shape: a build stage compiling both
// commands statically, a minimal runtime running as a non-root user.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("docker", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	froms := regexp.MustCompile(`(?m)^FROM\s+(\S+)(?:\s+AS\s+(\S+))?`).FindAllStringSubmatch(text, -1)
	if len(froms) < 2 {
		t.Fatalf("Dockerfile: %d stages, want a build stage and a runtime stage", len(froms))
	}
	runtime := froms[len(froms)-1][1]
	if !strings.Contains(runtime, "distroless") && !strings.Contains(runtime, "slim") {
		t.Errorf("Dockerfile: runtime image %s, want distroless or debian-slim", runtime)
	}
	root := repoRoot(t)
	for _, cmd := range []string{"collector", "sweeper"} {
		if !regexp.MustCompile(`CGO_ENABLED=0[^\n]*go build[^\n]*\./cmd/` + cmd + `\b`).MatchString(text) {
			t.Errorf("Dockerfile: no CGO_ENABLED=0 go build of ./cmd/%s", cmd)
		}
		if _, err := os.Stat(filepath.Join(root, "cmd", cmd, "main.go")); err != nil {
			t.Errorf("Dockerfile builds ./cmd/%s: %v", cmd, err)
		}
	}
	users := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(text, -1)
	if len(users) == 0 {
		t.Fatal("Dockerfile: no USER: the runtime would run as root")
	}
	if u := users[len(users)-1][1]; u == "root" || u == "0" || strings.HasPrefix(u, "0:") || strings.HasPrefix(u, "root:") {
		t.Errorf("Dockerfile: runs as %s, want a non-root user", u)
	}
}

// TestKubernetes parses every document of the manifests with goccy/go-yaml,
// then checks the sidecar Deployment against its embedded config.
func TestKubernetes(t *testing.T) {
	type probe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port any    `yaml:"port"`
		} `yaml:"httpGet"`
	}
	type secCtx struct {
		RunAsNonRoot           *bool `yaml:"runAsNonRoot"`
		ReadOnlyRootFilesystem *bool `yaml:"readOnlyRootFilesystem"`
	}
	type container struct {
		Name  string   `yaml:"name"`
		Image string   `yaml:"image"`
		Args  []string `yaml:"args"`
		Env   []struct {
			Name      string `yaml:"name"`
			ValueFrom *struct {
				SecretKeyRef *struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"secretKeyRef"`
			} `yaml:"valueFrom"`
		} `yaml:"env"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
		Resources struct {
			Limits map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		LivenessProbe   *probe  `yaml:"livenessProbe"`
		ReadinessProbe  *probe  `yaml:"readinessProbe"`
		SecurityContext *secCtx `yaml:"securityContext"`
	}
	type doc struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Data map[string]string `yaml:"data"`
		Spec struct {
			Template struct {
				Spec struct {
					SecurityContext *secCtx     `yaml:"securityContext"`
					Containers      []container `yaml:"containers"`
					Volumes         []struct {
						Name      string `yaml:"name"`
						EmptyDir  any    `yaml:"emptyDir"`
						ConfigMap *struct {
							Name string `yaml:"name"`
						} `yaml:"configMap"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}

	var docs []doc
	var files []string
	for _, p := range yamlFiles(t) {
		if !strings.HasPrefix(p, "kubernetes"+string(filepath.Separator)) {
			continue
		}
		files = append(files, p)
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(f)
		for i := 0; ; i++ {
			var raw map[string]any
			err := dec.Decode(&raw)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				f.Close()
				t.Fatalf("%s: document %d: %v", p, i, err)
			}
			if raw == nil {
				continue // an empty document
			}
			if raw["apiVersion"] == nil || raw["kind"] == nil {
				t.Errorf("%s: document %d has no apiVersion or kind", p, i)
			}
			b, err := yaml.Marshal(raw)
			if err != nil {
				t.Fatal(err)
			}
			var d doc
			if err := yaml.Unmarshal(b, &d); err != nil {
				t.Fatalf("%s: document %d: %v", p, i, err)
			}
			docs = append(docs, d)
		}
		f.Close()
	}
	if len(files) == 0 {
		t.Fatal("no manifests under kubernetes/")
	}

	configMaps := map[string]map[string]string{}
	var deploy *doc
	for i, d := range docs {
		switch d.Kind {
		case "ConfigMap":
			configMaps[d.Metadata.Name] = d.Data
		case "Deployment":
			deploy = &docs[i]
		}
	}
	if deploy == nil {
		t.Fatal("no Deployment")
	}
	pod := deploy.Spec.Template.Spec
	byName := map[string]container{}
	for _, c := range pod.Containers {
		byName[c.Name] = c
	}
	nginx, okN := byName["nginx"]
	col, okC := byName["collector"]
	if !okN || !okC {
		t.Fatalf("Deployment containers %v, want nginx and collector", slices.Collect(func(yield func(string) bool) {
			for n := range byName {
				if !yield(n) {
					return
				}
			}
		}))
	}

	// The log volume: an emptyDir mounted by both.
	emptyDirs := map[string]bool{}
	configVolumes := map[string]string{}
	for _, v := range pod.Volumes {
		if v.EmptyDir != nil {
			emptyDirs[v.Name] = true
		}
		if v.ConfigMap != nil {
			configVolumes[v.Name] = v.ConfigMap.Name
		}
	}
	mounts := func(c container) map[string]string {
		m := map[string]string{}
		for _, vm := range c.VolumeMounts {
			m[vm.Name] = vm.MountPath
		}
		return m
	}
	nm, cm := mounts(nginx), mounts(col)
	var logDir string
	for name, path := range cm {
		if emptyDirs[name] && nm[name] == path {
			logDir = path
		}
	}
	if logDir == "" {
		t.Fatalf("no emptyDir mounted at the same path in nginx (%v) and collector (%v)", nm, cm)
	}

	// The collector's resources, probes, secret and security.
	if l := col.Resources.Limits; l["memory"] != "200Mi" || l["cpu"] != "200m" {
		t.Errorf("collector limits %v, want memory 200Mi, cpu 200m", l)
	}
	checkProbe := func(kind string, p *probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || fmt.Sprint(p.HTTPGet.Port) != "9464" {
			t.Errorf("collector %s probe: want GET %s on 9464", kind, path)
		}
	}
	checkProbe("liveness", col.LivenessProbe, "/healthz")
	checkProbe("readiness", col.ReadinessProbe, "/readyz")
	secret := false
	for _, e := range col.Env {
		if e.Name == "CLICKHOUSE_PASSWORD" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != "" {
			secret = true
		}
	}
	if !secret {
		t.Error("collector: CLICKHOUSE_PASSWORD must come from a Secret (secretKeyRef)")
	}
	for _, c := range pod.Containers {
		nonRoot := pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot
		if c.SecurityContext != nil && c.SecurityContext.RunAsNonRoot != nil {
			nonRoot = *c.SecurityContext.RunAsNonRoot
		}
		if !nonRoot {
			t.Errorf("container %s: not runAsNonRoot", c.Name)
		}
		if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("container %s: not readOnlyRootFilesystem", c.Name)
		}
	}

	// The config the collector reads: from the ConfigMap, at the path its
	// args name; it loads, listens where the probes look, reads the log
	// volume and keeps its state on a writable volume.
	if len(col.Args) < 3 || col.Args[1] != "-config" {
		t.Fatalf("collector args %v, want collector -config FILE", col.Args)
	}
	cfgPath := col.Args[2]
	var cfgData string
	for name, path := range cm {
		if cmName, ok := configVolumes[name]; ok && path == filepath.Dir(cfgPath) {
			cfgData = configMaps[cmName][filepath.Base(cfgPath)]
		}
	}
	if cfgData == "" {
		t.Fatalf("collector reads %s, but no ConfigMap key is mounted there", cfgPath)
	}
	tmp := filepath.Join(t.TempDir(), "hitcount.yaml")
	if err := os.WriteFile(tmp, []byte(cfgData), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(tmp)
	if err != nil {
		t.Fatalf("the ConfigMap's %s does not load:\n%v", filepath.Base(cfgPath), err)
	}
	if err := cfg.CheckCollector(); err != nil {
		t.Errorf("the ConfigMap's config is not enough for the collector:\n%v", err)
	}
	if *cfg.HTTP.Listen != "0.0.0.0:9464" {
		t.Errorf("http.listen %q: the kubelet probes the pod IP, so it must be 0.0.0.0:9464", *cfg.HTTP.Listen)
	}
	for _, s := range cfg.Sources {
		if !strings.HasPrefix(s.Path, logDir+"/") {
			t.Errorf("source %s is outside the shared log volume %s", s.Path, logDir)
		}
	}
	writable := false
	for name, path := range cm {
		if emptyDirs[name] && path == cfg.StateDir {
			writable = true
		}
	}
	if !writable {
		t.Errorf("state_dir %s is not on a writable volume of the collector (the root filesystem is read-only)", cfg.StateDir)
	}
}

// unit is a parsed systemd unit file: section -> key -> values (a key may
// repeat).
type unit map[string]map[string][]string

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	section := ""
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", path, i+1, line)
			}
			u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	return u
}

// last is a key's effective value (the last assignment wins).
func (u unit) last(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// TestSystemdUnits checks the directives the units promise, then verifies the
// units with systemd-analyze verify in a scratch root (where the binaries
// exist), failing on any warning it prints.
func TestSystemdUnits(t *testing.T) {
	const cfgArgs = "-config /etc/hitcount/hitcount.yaml"
	services := map[string]string{
		"hitcount-collector.service":    "/usr/local/bin/collector " + cfgArgs + " -log-format json",
		"hitcount-sweeper.service":      "/usr/local/bin/sweeper " + cfgArgs + " -log-format json",
		"hitcount-sweeper-once.service": "/usr/local/bin/sweeper " + cfgArgs + " -once -log-format json",
		"hitcount-standalone.service":   "/usr/local/bin/hitcount run " + cfgArgs + " -log-format json",
	}
	hardening := map[string]string{
		"User":                    "hitcount",
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"ReadWritePaths":          "/var/lib/hitcount",
		"StateDirectory":          "hitcount",
		"CapabilityBoundingSet":   "",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"MemoryMax":               "200M",
		"EnvironmentFile":         "-/etc/hitcount/env",
		"KillSignal":              "SIGTERM",
		"TimeoutStopSec":          "60",
	}
	for name, exec := range services {
		u := parseUnit(t, filepath.Join("systemd", name))
		if got := u.last("Service", "ExecStart"); got != exec {
			t.Errorf("%s: ExecStart=%s, want %s", name, got, exec)
		}
		for k, want := range hardening {
			if k == "MemoryMax" && name == "hitcount-standalone.service" {
				want = "2G" // the embedded engine runs in the process
			}
			if _, ok := u["Service"][k]; !ok {
				t.Errorf("%s: no %s=", name, k)
			} else if got := u.last("Service", k); got != want {
				t.Errorf("%s: %s=%s, want %s", name, k, got, want)
			}
		}
		if f := u["Service"]["SystemCallFilter"]; len(f) == 0 || f[0] != "@system-service" {
			t.Errorf("%s: SystemCallFilter %v, want @system-service first", name, f)
		}
		if name == "hitcount-sweeper-once.service" {
			if u.last("Service", "Type") != "oneshot" {
				t.Errorf("%s: Type=%s, want oneshot", name, u.last("Service", "Type"))
			}
			continue
		}
		if u.last("Service", "Restart") != "always" || u.last("Service", "RestartSec") != "2" {
			t.Errorf("%s: Restart=%s RestartSec=%s, want always, 2", name, u.last("Service", "Restart"), u.last("Service", "RestartSec"))
		}
		// A refused ClickHouse login exits with backend.ExitLoginRefused.
		if got, want := u.last("Service", "RestartPreventExitStatus"), strconv.Itoa(backend.ExitLoginRefused); got != want {
			t.Errorf("%s: RestartPreventExitStatus=%s, want %s (a refused login is not restarted)", name, got, want)
		}
	}
	collector := parseUnit(t, filepath.Join("systemd", "hitcount-collector.service"))
	if !slices.Contains(collector["Service"]["SupplementaryGroups"], "adm") && collector.last("Service", "Group") != "adm" {
		t.Error("hitcount-collector.service: the user must be in group adm to read /var/log/nginx")
	}
	timer := parseUnit(t, filepath.Join("systemd", "hitcount-sweeper.timer"))
	if timer.last("Timer", "Unit") != "hitcount-sweeper-once.service" || timer.last("Timer", "OnUnitActiveSec") != "5min" {
		t.Errorf("hitcount-sweeper.timer: Unit=%s OnUnitActiveSec=%s, want hitcount-sweeper-once.service, 5min",
			timer.last("Timer", "Unit"), timer.last("Timer", "OnUnitActiveSec"))
	}

	// systemd-analyze verify checks each ExecStart binary exists, so verify
	// in a scratch root holding stand-ins for them and the system's units.
	bin := requireTool(t, "systemd-analyze")
	root := t.TempDir()
	for _, d := range []string{"usr/local/bin", "etc/systemd/system", "usr/lib/systemd"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range []string{"collector", "sweeper", "hitcount"} {
		if err := os.WriteFile(filepath.Join(root, "usr/local/bin", b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("cp", "-a", "/usr/lib/systemd/system", filepath.Join(root, "usr/lib/systemd/")).CombinedOutput(); err != nil {
		t.Fatalf("copy the system's units: %v\n%s", err, out)
	}
	units, err := filepath.Glob(filepath.Join("systemd", "*"))
	if err != nil || len(units) != 5 {
		t.Fatalf("systemd/: %v %v, want 5 units", units, err)
	}
	args := []string{"verify", "--root=" + root}
	for _, u := range units {
		data, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, "etc/systemd/system", filepath.Base(u))
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, dst)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify (exit: %v) printed:\n%s", err, out)
	}
}
