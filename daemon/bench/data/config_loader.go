package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Config is the top-level application configuration.
type Config struct {
	Env      string          `json:"env"`
	Server   ServerConfig    `json:"server"`
	Database DatabaseConfig  `json:"database"`
	LogLevel string          `json:"log_level"`
	Features map[string]bool `json:"features"`
}

// ServerConfig controls the HTTP listener.
type ServerConfig struct {
	Host         string   `json:"host"`
	Port         int      `json:"port"`
	ReadTimeout  Duration `json:"read_timeout"`
	WriteTimeout Duration `json:"write_timeout"`
}

// DatabaseConfig describes how to reach the primary database.
type DatabaseConfig struct {
	URL          string `json:"url"`
	MaxOpenConns int    `json:"max_open_conns"`
	MaxIdleConns int    `json:"max_idle_conns"`
}

// Duration wraps time.Duration so it can be written as "5s" in JSON.
type Duration struct {
	time.Duration
}

// UnmarshalJSON accepts either a duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(data []byte) error {
	var raw interface{}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	switch v := raw.(type) {
	case float64:
		d.Duration = time.Duration(v)
	case string:
		parsed, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("invalid duration %q: %w", v, err)
		}
		d.Duration = parsed
	default:
		return fmt.Errorf("invalid duration type %T", raw)
	}
	return nil
}

// Default returns a configuration populated with safe defaults.
func Default() Config {
	return Config{
		Env:      "development",
		LogLevel: "info",
		Server: ServerConfig{
			Host:         "0.0.0.0",
			Port:         8080,
			ReadTimeout:  Duration{5 * time.Second},
			WriteTimeout: Duration{10 * time.Second},
		},
		Database: DatabaseConfig{
			MaxOpenConns: 10,
			MaxIdleConns: 2,
		},
		Features: map[string]bool{},
	}
}

// Load reads the JSON file at path (if non-empty), then applies environment overrides
// using the given prefix, and finally validates the result.
func Load(path, prefix string) (Config, error) {
	cfg := Default()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("config: read %s: %w", path, err)
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			return cfg, fmt.Errorf("config: parse %s: %w", path, err)
		}
	}
	if err := applyEnv(&cfg, prefix, os.LookupEnv); err != nil {
		return cfg, err
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

type lookupFunc func(string) (string, bool)

func applyEnv(cfg *Config, prefix string, lookup lookupFunc) error {
	key := func(name string) string {
		return strings.ToUpper(prefix + "_" + name)
	}
	if v, ok := lookup(key("ENV")); ok {
		cfg.Env = v
	}
	if v, ok := lookup(key("LOG_LEVEL")); ok {
		cfg.LogLevel = strings.ToLower(v)
	}
	if v, ok := lookup(key("HOST")); ok {
		cfg.Server.Host = v
	}
	if v, ok := lookup(key("PORT")); ok {
		port, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("config: %s: %w", key("PORT"), err)
		}
		cfg.Server.Port = port
	}
	if v, ok := lookup(key("DATABASE_URL")); ok {
		cfg.Database.URL = v
	}
	if v, ok := lookup(key("FEATURES")); ok {
		if cfg.Features == nil {
			cfg.Features = make(map[string]bool)
		}
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			enabled := !strings.HasPrefix(name, "-")
			cfg.Features[strings.TrimPrefix(name, "-")] = enabled
		}
	}
	return nil
}

// Validate checks that the configuration is internally consistent.
func (c Config) Validate() error {
	var errs []error
	switch c.Env {
	case "development", "staging", "production":
	default:
		errs = append(errs, fmt.Errorf("unknown env %q", c.Env))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("unknown log level %q", c.LogLevel))
	}
	if c.Server.Port <= 0 || c.Server.Port > 65535 {
		errs = append(errs, fmt.Errorf("server port %d out of range", c.Server.Port))
	}
	if c.Env == "production" && c.Database.URL == "" {
		errs = append(errs, errors.New("database url is required in production"))
	}
	if c.Database.MaxIdleConns > c.Database.MaxOpenConns {
		errs = append(errs, errors.New("max_idle_conns cannot exceed max_open_conns"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("config: invalid: %w", errors.Join(errs...))
	}
	return nil
}

// Addr returns the host:port the server should listen on.
func (c Config) Addr() string {
	return fmt.Sprintf("%s:%d", c.Server.Host, c.Server.Port)
}

// Enabled reports whether a named feature flag is turned on.
func (c Config) Enabled(feature string) bool {
	return c.Features[feature]
}
