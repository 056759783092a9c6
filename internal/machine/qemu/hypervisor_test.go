//go:build unix

package qemu

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/machine/vm"
	"github.com/sbx-dev/sbx/platform"
)

// fill sets every field of the struct v points to, recursively, to a
// value other than its zero.
func fill(t *testing.T, v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{"x"}))
		case reflect.Map:
			f.Set(reflect.ValueOf(map[string]string{"p": "/p.sock"}))
		case reflect.Struct:
			fill(t, f)
		case reflect.Pointer:
			if f.Type() == reflect.TypeFor[*os.File]() {
				f.Set(reflect.ValueOf(os.Stdin))
				continue
			}
			f.Set(reflect.New(f.Type().Elem()))
			fill(t, f.Elem())
		default:
			t.Fatalf("vm.Spec field %s of kind %s: teach fill it", v.Type().Field(i).Name, f.Kind())
		}
	}
}

// TestSpecFor: every field of a vm.Spec reaches the VMSpec; only the
// VMSpec's own (Paused) stays zero.
func TestSpecFor(t *testing.T) {
	var spec vm.Spec
	fill(t, reflect.ValueOf(&spec).Elem())
	got := reflect.ValueOf(SpecFor(spec))
	own := map[string]bool{"Paused": true}
	for i := 0; i < got.NumField(); i++ {
		name := got.Type().Field(i).Name
		if zero := got.Field(i).IsZero(); zero != own[name] {
			t.Errorf("VMSpec.%s zero = %v, want %v", name, zero, own[name])
		}
	}
	g := SpecFor(spec)
	if g.QMPSocket != spec.ControlSocket || g.QEMULog != spec.Log || g.VirtFS != spec.Bench.VirtFS || g.TCGBufferMiB != spec.Bench.TCGBufferMiB {
		t.Errorf("SpecFor(%+v) = %+v", spec, g)
	}
}

// TestHypervisorGivenHost: a Hypervisor given a host describes it
// without probing, and a spec QEMU cannot run is an error with no
// process.
func TestHypervisorGivenHost(t *testing.T) {
	host := Host{OS: "linux", Arch: "amd64", Accels: []Accel{AccelKVM, AccelTCG}, Note: "a note",
		QEMU: map[string]Binary{"amd64": {Path: "/nonexistent/qemu-system-x86_64", Version: Version{Major: 8, Minor: 2}}}}
	h := New(&host)
	host.Note = "changed after New"
	ctx := context.Background()
	for arch, want := range map[string]vm.Host{
		"amd64": {Accel: AccelKVM, Note: "a note"},
		"arm64": {Accel: AccelTCG, Note: "a note"},
	} {
		got, err := h.Probe(ctx, arch)
		if err != nil || got != want {
			t.Errorf("Probe(%s) = %+v, %v; want %+v", arch, got, err, want)
		}
	}
	p, err := h.Start(ctx, vm.Spec{Name: "x", Platform: platform.Platform{OS: "linux", Architecture: "amd64"}, CPUs: 0, MemoryBytes: 1 << 20, Kernel: "/k", ControlSocket: "/tmp/q.sock"})
	if err == nil || !strings.Contains(err.Error(), "cpus is 0") {
		t.Errorf("Start with no CPUs: %v", err)
	}
	if p != nil {
		t.Errorf("Start failed and returned the process %#v", p)
	}
}
