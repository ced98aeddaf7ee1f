package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// LoadFile applies a YAML file of one document, a mapping of settings
// (keys as the flags', with _ for -). Each value is read as the flag's
// would be, so sizes take units and durations are written as for flags.
// Errors name the file, the line and the key, in the words of the flags'
// help: an unknown key with the setting it most likely meant, a value of
// the wrong kind with what is wanted and what was given. A repeated key
// and a second document (after a `---`, which would otherwise be ignored)
// are errors too. An empty file is fine.
func (c *Config) LoadFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config: --config: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) { // an empty file
			return nil
		}
		return fmt.Errorf("config: %s: %w", path, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return fmt.Errorf("config: %s: line %d: a second YAML document; only one is read, so put every setting in the first", path, next.Line)
	case !errors.Is(err, io.EOF):
		return fmt.Errorf("config: %s: %w", path, err)
	}
	switch errs := c.applyYAML(&doc); len(errs) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("config: %s: %w", path, errs[0])
	default: // one a line, each under the file's name
		lines := make([]error, len(errs))
		for i, err := range errs {
			lines[i] = fmt.Errorf("  %w", err)
		}
		return fmt.Errorf("config: %s: %d problems:\n%w", path, len(errs), errors.Join(lines...))
	}
}

// applyYAML applies a decoded document and returns every problem.
func (c *Config) applyYAML(doc *yaml.Node) []error {
	top := doc
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		top = doc.Content[0]
	}
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" || top.Kind == yaml.DocumentNode {
		return nil // comments only
	}
	if top.Kind != yaml.MappingNode {
		return []error{fmt.Errorf("line %d: want settings as key: value lines, got %s", top.Line, kindOf(top))}
	}
	fields := map[string]reflect.Value{}
	c.each(func(f reflect.StructField, v reflect.Value) { fields[f.Tag.Get("yaml")] = v })
	seen := map[string]int{}
	var errs []error
	for i := 0; i+1 < len(top.Content); i += 2 {
		key, val := top.Content[i], top.Content[i+1]
		v, ok := fields[key.Value]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("line %d: %s", key.Line, c.unknownKey(key.Value)))
		case seen[key.Value] > 0:
			errs = append(errs, fmt.Errorf("line %d: %s given twice (first on line %d)", key.Line, key.Value, seen[key.Value]))
		default:
			seen[key.Value] = key.Line
			if err := setYAML(v, val); err != nil {
				errs = append(errs, fmt.Errorf("line %d: %s: %w", val.Line, key.Value, err))
			}
		}
	}
	return errs
}

// setYAML sets a field from a YAML value: a list for list settings, else
// a scalar read as set reads a flag's (so a scalar for a Repeated setting
// is one value, for another list setting comma-separated values).
func setYAML(v reflect.Value, n *yaml.Node) error {
	if v.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode {
		items := make([]string, 0, len(n.Content))
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode {
				return fmt.Errorf("want a list of single values, got %s in it (line %d)", kindOf(item), item.Line)
			}
			items = append(items, item.Value)
		}
		v.Set(reflect.ValueOf(items).Convert(v.Type()))
		return nil
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" && v.Kind() != reflect.String {
		return fmt.Errorf("%s, got %s", want(v), kindOf(n))
	}
	if _, ok := v.Interface().(Repeated); ok { // one value for a list
		return setYAML(v, &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{n}})
	}
	if err := set(v, n.Value); err != nil {
		return fmt.Errorf("%w, got %q", err, n.Value)
	}
	return nil
}

// want says what a field takes: set's error for a value no setting takes.
func want(v reflect.Value) string {
	if v.Kind() == reflect.Slice {
		return "want a list"
	}
	probe := reflect.New(v.Type()).Elem()
	if err := set(probe, "\x00"); err != nil {
		return err.Error()
	}
	return "want a single value"
}

// kindOf names a YAML node's kind for a user.
func kindOf(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.Kind == yaml.MappingNode:
		return "key: value pairs"
	case n.Kind == yaml.AliasNode:
		return "an alias"
	case n.Tag == "!!null":
		return "nothing"
	}
	return fmt.Sprintf("%q", n.Value)
}

// unknownKey says that key is no setting, naming the one it most likely
// meant.
func (c *Config) unknownKey(key string) string {
	if f, ok := c.closest(key); ok {
		return fmt.Sprintf("unknown key %s (did you mean %s?)", key, f.Tag.Get("yaml"))
	}
	return fmt.Sprintf("unknown key %s (the keys are the flags of 'crawler run -h', with _ for -)", key)
}
