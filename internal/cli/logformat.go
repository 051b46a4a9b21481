package cli

import (
	"io"
	"log/slog"

	"github.com/spf13/pflag"
)

// registerLogFormat adds --log-format (REINS_LOG_FORMAT) to f, setting
// format.
func registerLogFormat(f *pflag.FlagSet, format *string) {
	f.StringVar(format, "log-format", "text", "text (key=value lines) or json (one JSON object a line, for log pipelines) (REINS_LOG_FORMAT)")
	bindEnv(f, envFallback{"log-format", "REINS_LOG_FORMAT"})
}

// newLogger is a logger writing to w in format (text or json) from level
// on; another format is refused, naming the flag.
func newLogger(f *pflag.FlagSet, w io.Writer, format string, level slog.Leveler) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text", "TEXT":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json", "JSON":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, flagError(f, "log-format", "want text or json, got %q", format)
}
