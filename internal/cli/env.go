package cli

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"
)

// envAnnotation is the flag annotation naming the environment variable a
// flag falls back to.
const envAnnotation = "reins_env"

// envFallback names the environment variable a flag falls back to when it
// is not given on the command line.
type envFallback struct {
	flag, env string
}

// bindEnv records the flags' environment variables on the flag set.
func bindEnv(fs *pflag.FlagSet, fallbacks ...envFallback) {
	for _, fb := range fallbacks {
		if err := fs.SetAnnotation(fb.flag, envAnnotation, []string{fb.env}); err != nil {
			panic(err) // a flag name mistyped in the code
		}
	}
}

// flagEnv is the environment variable of a flag, or "".
func flagEnv(fs *pflag.FlagSet, name string) string {
	if f := fs.Lookup(name); f != nil && len(f.Annotations[envAnnotation]) == 1 {
		return f.Annotations[envAnnotation][0]
	}
	return ""
}

// applyEnv sets each flag that was not given on the command line from its
// environment variable, parsed as the flag parses its arguments. A value
// the flag does not accept is refused, naming the variable and the flag,
// instead of being replaced by the default. Flags' defaults stay what
// --help shows, so a secret in the environment is never printed there.
func applyEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		env := flagEnv(fs, f.Name)
		v, ok := os.LookupEnv(env)
		if err != nil || env == "" || !ok || v == "" || f.Changed {
			return
		}
		if serr := f.Value.Set(v); serr != nil {
			err = fmt.Errorf("%s=%q, the fallback of --%s: %w", env, v, f.Name, serr)
		}
	})
	return err
}

// flagError is an error about a flag's value, naming the flag and its
// environment variable.
func flagError(fs *pflag.FlagSet, flag, format string, args ...any) error {
	name := "--" + flag
	if env := flagEnv(fs, flag); env != "" {
		name += " (" + env + ")"
	}
	return fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
}
