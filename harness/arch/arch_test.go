package arch

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Every row must be complete: a missing field shows up as a confusing QEMU or
// make error much later, so catch it here.
func TestTableComplete(t *testing.T) {
	for _, a := range All() {
		t.Run(string(a.Name), func(t *testing.T) {
			v := reflect.ValueOf(a)
			for i := range v.NumField() {
				f := v.Type().Field(i)
				switch f.Name {
				case "Cmdline", "KVMCapable", "LLVM":
					continue // legitimately empty or false
				}
				if v.Field(i).IsZero() {
					t.Errorf("field %s is empty", f.Name)
				}
			}
			if !a.Has(DirectCalls) {
				t.Errorf("%s: every supported arch has direct calls", a.Name)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		in   string
		want Name
		err  error
	}{
		{"x86_64", X86_64, nil},
		{"amd64", X86_64, nil},
		{"riscv64", RISCV64, nil},
		{"arm64", ARM64, nil},
		{"ppc64le", PPC64LE, nil},
		{"s390x", "", ErrUnknown},
		{"", "", ErrUnknown},
	}
	for _, tt := range tests {
		got, err := Lookup(tt.in)
		if !errors.Is(err, tt.err) {
			t.Errorf("Lookup(%q) error = %v, want %v", tt.in, err, tt.err)
		}
		if got.Name != tt.want {
			t.Errorf("Lookup(%q) = %q, want %q", tt.in, got.Name, tt.want)
		}
	}
}

func TestX86HasNoCallOps(t *testing.T) {
	a, err := Lookup("x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if a.Has(CallOps) {
		t.Error("x86_64 must not claim CALL_OPS: Linux has none there")
	}
}

func TestByUname(t *testing.T) {
	for m, want := range map[string]Name{"x86_64": X86_64, "aarch64": ARM64, "riscv64": RISCV64, "ppc64le": PPC64LE} {
		a, err := ByUname(m)
		if err != nil || a.Name != want {
			t.Errorf("ByUname(%q) = %s, %v; want %s", m, a.Name, err, want)
		}
	}
	if _, err := ByUname("s390x"); !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), "aarch64") {
		t.Errorf("ByUname(s390x) err = %v, want ErrUnknown listing the known ones", err)
	}
}
