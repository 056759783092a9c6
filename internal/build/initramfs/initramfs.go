package initramfs

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/sbx-dev/sbx/internal/build/cpio"
	"github.com/sbx-dev/sbx/internal/build/kernel"
	"github.com/sbx-dev/sbx/internal/ctxio"
	"github.com/sbx-dev/sbx/internal/proto/bootproto"
)

// Options say what goes into an initramfs.
type Options struct {
	// Agent is the guest agent binary, a static ELF executable, written
	// as /init. AgentFile names a file to read it from instead; exactly
	// one of the two is set.
	Agent     []byte
	AgentFile string
	// KernelVersion names the modules directory, /lib/modules/VERSION.
	// It is required when Modules is not empty.
	KernelVersion string
	// Modules are the kernel modules the guest loads, in load order
	// (as kernel.Kernel.Closure lists them; see KernelModules).
	Modules []Module
	// Epoch is the modification time of every entry, in seconds since
	// 1970 (SOURCE_DATE_EPOCH).
	Epoch int64
	// Files are added as they are. They may add to the directories
	// Write makes but not replace anything Write puts in the archive.
	Files []cpio.File
}

// Module is one kernel module file.
type Module struct {
	// Name is the module's name ("virtio_blk").
	Name string
	// File is its path under the modules directory, uncompressed
	// ("kernel/drivers/block/virtio_blk.ko").
	File string
	// Data are the module's bytes, uncompressed.
	Data []byte
}

// KernelModules returns the modules the guest must load so that names
// (module names or aliases) are present in kernel k, in load order, with
// their decompressed bytes. Modules built into the kernel need no file
// and are left out. Reading stops with ctx's error once ctx ends.
func KernelModules(ctx context.Context, k *kernel.Kernel, names []string) ([]Module, error) {
	mods, err := k.Closure(names)
	if err != nil {
		return nil, err
	}
	data, err := k.ReadModules(ctx, mods)
	if err != nil {
		return nil, err
	}
	out := make([]Module, 0, len(mods))
	for _, m := range mods {
		out = append(out, Module{Name: m.Name, File: m.File(), Data: data[m.Name]})
	}
	return out, nil
}

// dirModes are the modes of the directories the agent mounts on.
var dirModes = map[string]uint32{
	"dev": 0o755, "proc": 0o555, "run": 0o755, "sys": 0o555, bootproto.SysrootDir: 0o755, "tmp": 0o1777,
}

// Write writes the initramfs that opts describe to w. Once ctx ends it
// writes nothing more, not even the rest of the file it is writing, and
// returns an error wrapping ctx's.
func Write(ctx context.Context, w io.Writer, opts Options) error {
	agent, err := agentBytes(opts)
	if err != nil {
		return err
	}
	files := []cpio.File{
		{Entry: cpio.Entry{Name: bootproto.InitPath, Mode: cpio.TypeRegular | 0o755, Size: int64(len(agent))}, Open: cpio.Bytes(agent)},
		{Entry: cpio.Entry{Name: "dev/console", Mode: cpio.TypeChar | 0o600, DevMajor: 5, DevMinor: 1}},
		{Entry: cpio.Entry{Name: "dev/null", Mode: cpio.TypeChar | 0o666, DevMajor: 1, DevMinor: 3}},
	}
	for _, d := range bootproto.Dirs {
		mode, ok := dirModes[d]
		if !ok {
			mode = 0o755
		}
		files = append(files, cpio.File{Entry: cpio.Entry{Name: d, Mode: cpio.TypeDir | mode}})
	}

	if len(opts.Modules) > 0 {
		if opts.KernelVersion == "" || strings.ContainsAny(opts.KernelVersion, "/ \n") || opts.KernelVersion == "." || opts.KernelVersion == ".." {
			return fmt.Errorf("initramfs: kernel version %q cannot name a modules directory", opts.KernelVersion)
		}
		modDir := path.Join(bootproto.ModulesDir, opts.KernelVersion)
		var list []bootproto.ModuleEntry
		for _, m := range opts.Modules {
			if m.File == "" || path.IsAbs(m.File) || path.Clean(m.File) != m.File || strings.HasPrefix(m.File, "../") {
				return fmt.Errorf("initramfs: module %s: file %q must be a clean path under the modules directory", m.Name, m.File)
			}
			if !bytes.HasPrefix(m.Data, []byte(elf.ELFMAG)) {
				return fmt.Errorf("initramfs: module %s (%s) is not an uncompressed ELF object", m.Name, m.File)
			}
			name := path.Join(modDir, m.File)
			files = append(files, cpio.File{Entry: cpio.Entry{Name: name, Mode: cpio.TypeRegular | 0o644, Size: int64(len(m.Data))}, Open: cpio.Bytes(m.Data)})
			list = append(list, bootproto.ModuleEntry{Name: m.Name, File: name})
		}
		var manifest bytes.Buffer
		if err := bootproto.WriteModuleList(&manifest, list); err != nil {
			return fmt.Errorf("initramfs: %w", err)
		}
		files = append(files, cpio.File{
			Entry: cpio.Entry{Name: bootproto.ModuleListPath, Mode: cpio.TypeRegular | 0o644, Size: int64(manifest.Len())},
			Open:  cpio.Bytes(manifest.Bytes()),
		})
	}

	ours := map[string]bool{}
	for _, f := range files {
		ours[f.Name] = true
	}
	for _, f := range opts.Files {
		name, err := cpio.CleanName(f.Name)
		if err != nil {
			return fmt.Errorf("initramfs: extra file: %w", err)
		}
		if ours[name] {
			return fmt.Errorf("initramfs: extra file %s would replace what the initramfs needs there", name)
		}
	}
	files = append(files, opts.Files...)
	if err := cpio.WriteFiles(ctxio.Writer(ctx, w), opts.Epoch, files); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	return nil
}

func agentBytes(opts Options) ([]byte, error) {
	var agent []byte
	switch {
	case opts.Agent != nil && opts.AgentFile != "":
		return nil, errors.New("initramfs: both Agent and AgentFile are set")
	case opts.AgentFile != "":
		b, err := os.ReadFile(opts.AgentFile)
		if err != nil {
			return nil, fmt.Errorf("initramfs: reading the guest agent: %w", err)
		}
		agent = b
	case opts.Agent != nil:
		agent = opts.Agent
	default:
		return nil, errors.New("initramfs: no guest agent given (Options.Agent or Options.AgentFile)")
	}
	f, err := elf.NewFile(bytes.NewReader(agent))
	if err != nil {
		return nil, fmt.Errorf("initramfs: the guest agent %s is not an ELF executable: %w", agentName(opts), err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return nil, fmt.Errorf("initramfs: the guest agent %s is an ELF %v, not an executable", agentName(opts), f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return nil, fmt.Errorf("initramfs: the guest agent %s is dynamically linked; the initramfs has no libraries (build it with CGO_ENABLED=0)", agentName(opts))
		}
	}
	return agent, nil
}

func agentName(opts Options) string {
	if opts.AgentFile != "" {
		return opts.AgentFile
	}
	return "(given as bytes)"
}
