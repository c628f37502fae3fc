package ctl

import (
	"errors"
	"fmt"
	"reflect"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
)

// Reload re-reads the configuration file and applies its services and
// timeouts, as asked by who; it returns the settings that differ from the
// running ones and need a restart. It is kept in the edit log as a reload
// request is.
func (o *Ops) Reload(who api.Author) ([]string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	req := api.Request{Version: api.Version, Op: api.OpReload}
	restart, err := o.reload(who)
	resp := api.Response{Restart: restart}
	if err != nil {
		resp.Error = err.Error()
	}
	o.recordEdit(who, req, resp)
	return restart, err
}

func (o *Ops) reload(who api.Author) ([]string, error) {
	if o.path == "" {
		return nil, errors.New("reload: lbd was started without a configuration file")
	}
	cfg, err := conf.Load(o.path)
	if err == nil {
		err = cfg.CheckSchedulers(Schedulers())
		if err != nil {
			err = fmt.Errorf("%s: %w", o.path, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reload: %w; nothing changed", err)
	}
	restart := restartFields(o.started, cfg)
	if cfg.Log.Level != o.started.Log.Level {
		if o.setLevel == nil {
			restart = append(restart, "log.level")
		} else if err := o.setLevel(cfg.Log.Level); err != nil {
			return nil, fmt.Errorf("reload: log.level: %w; nothing changed", err)
		}
	}
	if err := o.apply(cfg.Services, cfg.Timeouts); err != nil {
		return nil, fmt.Errorf("reload: %s: %w; nothing changed", o.path, err)
	}
	o.readFile(cfg.Services, cfg.Timeouts)
	if o.setLevel != nil {
		o.started.Log.Level = cfg.Log.Level
	}
	o.log.Info("reloaded", append(authorFields(who), zap.String("path", o.path), zap.Int("services", len(cfg.Services)),
		zap.Strings("need_restart", restart))...)
	return restart, nil
}

// restartFields lists the settings, by YAML path, that differ between a
// and b and take effect only on a restart: everything but services,
// timeouts and log.level.
func restartFields(a, b conf.Config) []string {
	var out []string
	diffFields(reflect.ValueOf(a), reflect.ValueOf(b), "", &out)
	return out
}

func diffFields(a, b reflect.Value, path string, out *[]string) {
	switch a.Kind() {
	case reflect.Struct:
		t := a.Type()
		for i := range t.NumField() {
			key := t.Field(i).Tag.Get("mapstructure")
			p := key
			if path != "" {
				p = path + "." + key
			}
			switch p {
			case "services", "timeouts", "log.level":
				continue
			}
			diffFields(a.Field(i), b.Field(i), p, out)
		}
	case reflect.Slice:
		if a.Len() != b.Len() || a.Type().Elem().Kind() != reflect.Struct {
			if !reflect.DeepEqual(a.Interface(), b.Interface()) {
				*out = append(*out, path)
			}
			return
		}
		for i := range a.Len() {
			diffFields(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, path)
		}
	}
}
