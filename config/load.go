package config

import (
	"flag"
	"io"
)

// FileFlag is the flag that names the YAML file (-config FILE, --config
// FILE or --config=FILE).
const FileFlag = "config"

// Load builds a Config in order of precedence: defaults, then the file
// named by --config in args (if given), then getenv's CRAWLER_* variables,
// then the flags in args. It defines --config and every field's flag on fs
// (besides any the caller defined there before) and parses args with it, so
// fs.Args() are the arguments after the flags. A flag's value is never taken
// for --config: args are parsed first by a flag set that knows every flag,
// so `--crawl config URL` names a crawl, not a file. Errors are fs.Parse's
// (flag.ErrHelp for -h), or wrapped ones from the file or the environment;
// Load does not Validate.
func Load(fs *flag.FlagSet, args []string, getenv func(string) string) (*Config, error) {
	path, err := findFile(fs, args)
	c := Default()
	if err != nil { // the same parse reports it, as the caller set fs up to
		c.Bind(fs)
		fs.String(FileFlag, "", fileHelp)
		if perr := fs.Parse(args); perr != nil {
			return nil, perr
		}
		return nil, err
	}
	if path != "" {
		if err := c.LoadFile(path); err != nil {
			return nil, err
		}
	}
	if err := c.ApplyEnv(getenv); err != nil {
		return nil, err
	}
	c.Bind(fs)
	fs.String(FileFlag, path, fileHelp)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return &c, nil
}

const fileHelp = "YAML file of settings (keys as in the flags, with _ for -); CRAWLER_* and flags override it"

// findFile parses args with a silent copy of fs plus every Config flag and
// --config, and returns --config's value ("" when not given). Values are
// discarded: this pass only attributes each argument to its flag.
func findFile(fs *flag.FlagSet, args []string) (string, error) {
	first := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	first.SetOutput(io.Discard)
	first.Usage = func() {}
	fs.VisitAll(func(f *flag.Flag) { first.Var(shadow{isBool(f.Value)}, f.Name, "") })
	scratch := Default()
	scratch.Bind(first)
	path := first.String(FileFlag, "", "")
	if err := first.Parse(args); err != nil {
		return "", err
	}
	return *path, nil
}

// shadow stands in for a caller's flag in findFile: it takes a value (or
// none, for a boolean flag) and keeps nothing.
type shadow struct{ boolean bool }

func (shadow) String() string     { return "" }
func (shadow) Set(string) error   { return nil }
func (s shadow) IsBoolFlag() bool { return s.boolean }
func isBool(v flag.Value) bool {
	b, ok := v.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
