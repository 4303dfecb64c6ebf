package latency

import (
	"time"

	"github.com/hitcount/hitcount/internal/collector"
)

// A mode is a way to wait at the end of a file.
type mode struct {
	name string
	tune func(*collector.Options)
}

// modes are the waits compared: "poll" checks an idle file every Poll (the
// only wait before the collector watched files), "watch" is woken when the
// file changes, Poll bounding the wait. (To measure a commit older than the
// watch, make this {"head", nil} alone.)
var modes = []mode{
	{"poll", func(o *collector.Options) { o.PollOnly = true }},
	{"watch", nil},
}

// cpuModes adds a watched wait without a poll to speak of (Poll 1h; never
// to be run so): what the backstop poll costs.
func cpuModes() []mode {
	return append(modes[:len(modes):len(modes)], mode{"watch-1h", func(o *collector.Options) { o.Poll = time.Hour }})
}
