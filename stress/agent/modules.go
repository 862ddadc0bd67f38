package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/cilium/ebpf/btf"

	"github.com/ftrace-harness/fth/stress/emit"
	"github.com/ftrace-harness/fth/stress/modload"
	"github.com/ftrace-harness/fth/wire/options"
)

// scaleModule loads fth_scale.ko when the scalemod option asks for it and
// returns its BTF for the inventory; nil when not asked.
func (a *agent) scaleModule(cache *btf.Cache) (map[string]*btf.Spec, error) {
	if !a.opts.ScaleModule {
		return nil, nil
	}
	name := options.ScaleModuleName
	t0 := time.Now()
	if !modload.Loaded(name) {
		path := filepath.Join(modload.DefaultDir, name+".ko")
		if err := modload.Load(path, ""); err != nil {
			return nil, fmt.Errorf("load %s (the host builds it for cells run with --agent-arg scalemod=true): %w", path, err)
		}
	}
	spec, err := cache.Module(name)
	if err != nil {
		return nil, fmt.Errorf("BTF of %s (CONFIG_DEBUG_INFO_BTF_MODULES): %w", name, err)
	}
	emit.Logf(a.w, "scale module %s loaded with its BTF in %v", name, time.Since(t0).Round(time.Millisecond))
	return map[string]*btf.Spec{name: spec}, nil
}
