package conf

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// EnvPrefix prefixes the environment variables that override settings:
// DPLB_ and the key path with "." replaced by "_", e.g. DPLB_LOG_LEVEL or
// DPLB_DATAPLANE_IDLE_SLEEP. List settings take comma-separated values
// (DPLB_DATAPLANE_WORKERS=2,3); ports and services cannot be overridden.
const EnvPrefix = "DPLB"

// Load reads the YAML file at path, applies the defaults to every absent
// field (also inside list elements), then the environment overrides, and
// validates the result with Validate(nil). Errors other than a failure to
// read the file are prefixed with path.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	c, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse is Load on YAML already in memory.
func Parse(yaml []byte) (Config, error) {
	c, err := decode(yaml)
	if err != nil {
		return Config{}, err
	}
	if err := c.Validate(nil); err != nil {
		return Config{}, err
	}
	return c, nil
}

// decode turns YAML into a Config with defaults and environment overrides
// applied, refusing unknown keys and values of the wrong type.
func decode(yaml []byte) (Config, error) {
	// Read the file alone first: its settings, without defaults, are what
	// the unknown-key check walks, and an explicit null (a key with no
	// value) is dropped here so that it means "default".
	raw := viper.New()
	raw.SetConfigType("yaml")
	if err := raw.ReadConfig(bytes.NewReader(yaml)); err != nil {
		return Config{}, fmt.Errorf("parsing YAML: %w", err)
	}
	settings := raw.AllSettings()
	if err := checkKeys(settings, reflect.TypeFor[Config](), ""); err != nil {
		return Config{}, err
	}

	v := viper.New()
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	for _, l := range leaves(reflect.ValueOf(Default()), "") {
		if err := v.BindEnv(l.key); err != nil {
			return Config{}, err
		}
		if l.value != nil {
			v.SetDefault(l.key, l.value)
		}
	}
	if err := v.MergeConfigMap(settings); err != nil {
		return Config{}, err
	}
	if err := octalMode(v, "control.socket_mode"); err != nil {
		return Config{}, err
	}

	var c Config
	err := v.Unmarshal(&c, viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		elementDefaults,
		durationHook,
		listHook,
	)), func(dc *mapstructure.DecoderConfig) {
		dc.ErrorUnused = true
	})
	if err != nil {
		return Config{}, decodeError(err)
	}
	return c, nil
}

// leaf is one settable key outside the port and service lists.
type leaf struct {
	key   string
	value any // default, nil for none
}

// leaves lists the keys of the structs inside v (which are not lists) with
// their values in v.
func leaves(v reflect.Value, prefix string) []leaf {
	var out []leaf
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key := prefix + f.Tag.Get("mapstructure")
		fv := v.Field(i)
		switch {
		case f.Type.Kind() == reflect.Struct:
			out = append(out, leaves(fv, key+".")...)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			// ports, services: defaults per element, no environment.
		case f.Type.Kind() == reflect.Slice && fv.IsNil():
			out = append(out, leaf{key: key})
		default:
			out = append(out, leaf{key: key, value: fv.Interface()})
		}
	}
	return out
}

// checkKeys refuses a key of m that is not a field of struct type t,
// naming it by its full path, and descends into lists of structs.
func checkKeys(m map[string]any, t reflect.Type, path string) error {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		fields[f.Tag.Get("mapstructure")] = f.Type
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		ft, ok := fields[strings.ToLower(k)]
		if !ok {
			return fieldErrorf(path+k, "unknown key")
		}
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			if sub, ok := m[k].(map[string]any); ok {
				if err := checkKeys(sub, ft, path+k+"."); err != nil {
					return err
				}
			}
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			list, _ := m[k].([]any)
			for i, e := range list {
				if sub, ok := e.(map[string]any); ok {
					if err := checkKeys(sub, ft.Elem(), fmt.Sprintf("%s%s[%d].", path, k, i)); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// octalMode replaces a string value of key by its value as an octal
// number: "0600", "600" and "0o600" all mean 0600. (A YAML number 0600 is
// octal already.)
func octalMode(v *viper.Viper, key string) error {
	s, ok := v.Get(key).(string)
	if !ok {
		return nil
	}
	t := strings.TrimSpace(s)
	t = strings.TrimPrefix(strings.TrimPrefix(t, "0o"), "0O")
	n, err := strconv.ParseUint(t, 8, 32)
	if err != nil {
		return &FieldError{Field: key, Msg: fmt.Sprintf("%q is not an octal mode (want e.g. 0600)", s), Err: err}
	}
	v.Set(key, uint32(n))
	return nil
}

var (
	portType     = reflect.TypeFor[Port]()
	serviceType  = reflect.TypeFor[Service]()
	serverType   = reflect.TypeFor[RealServer]()
	healthType   = reflect.TypeFor[HealthCheck]()
	feedbackType = reflect.TypeFor[Feedback]()
	durationType = reflect.TypeFor[time.Duration]()
)

// absent reports whether m has no value for key.
func absent(m map[string]any, key string) bool {
	return m[key] == nil
}

// elementDefaults fills the defaults into a port, service, real server,
// health check or feedback policy before it is decoded. A real server's
// port defaults to its service's.
func elementDefaults(_ reflect.Type, to reflect.Type, data any) (any, error) {
	in, ok := data.(map[string]any)
	if !ok || (to != portType && to != serviceType && to != serverType && to != healthType && to != feedbackType) {
		return data, nil
	}
	m := maps.Clone(in)
	switch to {
	case portType:
		if absent(m, "role") {
			m["role"] = defaultRole
		}
	case serviceType:
		if absent(m, "scheduler") {
			m["scheduler"] = defaultScheduler
		}
		if absent(m, "netmask") {
			m["netmask"] = defaultNetmask
		}
		if absent(m, "mh_table_size") {
			m["mh_table_size"] = defaultMHTable
		}
		health, _ := m["health"].(map[string]any)
		if absent(m, "health") {
			m["health"] = map[string]any{}
		}
		if absent(m, "feedback") {
			m["feedback"] = map[string]any{}
		}
		servers, ok := m["servers"].([]any)
		if !ok {
			break
		}
		servers = slices.Clone(servers)
		for i, s := range servers {
			sm, ok := s.(map[string]any)
			if !ok {
				continue
			}
			sm = maps.Clone(sm)
			if absent(sm, "port") && !absent(m, "port") {
				sm["port"] = m["port"]
			}
			// A server's own health keys replace the service's.
			if own, ok := sm["health"].(map[string]any); ok {
				merged := maps.Clone(health)
				if merged == nil {
					merged = map[string]any{}
				}
				maps.Copy(merged, own)
				sm["health"] = merged
			}
			servers[i] = sm
		}
		m["servers"] = servers
	case healthType:
		for k, v := range healthDefaults() {
			if absent(m, k) {
				m[k] = v
			}
		}
	case feedbackType:
		for k, v := range feedbackDefaults() {
			if absent(m, k) {
				m[k] = v
			}
		}
	case serverType:
		if absent(m, "weight") {
			m["weight"] = defaultWeight
		}
		if absent(m, "forward") {
			m["forward"] = defaultForward
		}
	}
	return m, nil
}

// durationHook parses duration strings ("30s", "1m30s") and refuses bare
// numbers other than 0, which would silently mean nanoseconds.
func durationHook(from reflect.Type, to reflect.Type, data any) (any, error) {
	if to != durationType {
		return data, nil
	}
	switch d := data.(type) {
	case string:
		v, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration (want e.g. \"30s\")", d)
		}
		return v, nil
	case time.Duration:
		return d, nil
	}
	switch from.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if reflect.ValueOf(data).IsZero() {
			return time.Duration(0), nil
		}
		return nil, fmt.Errorf("%v has no unit (want e.g. \"%vs\")", data, data)
	}
	return data, nil
}

// listHook splits a string (from the environment) into a list at commas:
// "2,3" for [2, 3]; "" is the empty list.
func listHook(from reflect.Type, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to.Kind() != reflect.Slice {
		return data, nil
	}
	s := strings.TrimSpace(reflect.ValueOf(data).String())
	if s == "" {
		return []string{}, nil
	}
	return strings.Split(s, ","), nil
}

// decodeError turns a mapstructure error into a *FieldError naming the
// innermost field it is about.
func decodeError(err error) error {
	var de *mapstructure.DecodeError
	if !errors.As(err, &de) {
		return err
	}
	for {
		var inner *mapstructure.DecodeError
		if !errors.As(de.Unwrap(), &inner) {
			break
		}
		de = inner
	}
	msg := de.Unwrap().Error()
	var pe *mapstructure.ParseError
	var ue *mapstructure.UnconvertibleTypeError
	switch {
	case errors.As(de.Unwrap(), &pe):
		msg = fmt.Sprintf("%q is not a valid %s", fmt.Sprint(pe.Value), pe.Expected.Type())
	case errors.As(de.Unwrap(), &ue):
		msg = fmt.Sprintf("%v cannot be used as %s", ue.Value, ue.Expected.Type())
	}
	return &FieldError{Field: de.Name(), Msg: msg, Err: err}
}
