package kerneltest

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/sbx-dev/sbx/internal/build/apt/apttest"
	"github.com/sbx-dev/sbx/internal/build/archive/archivetest"
)

// MetaPackage is the Debian meta package that depends on the current
// generic amd64 kernel.
const MetaPackage = apttest.KernelMeta

// DebianKernelDeb returns the path of the Debian generic amd64 kernel
// package (linux-image-VERSION-amd64, about 70 MB), as
// apttest.DebianKernel finds or downloads it. Without apt-get the test is
// skipped with a message saying why (archivetest.RequireApt); a failed
// download fails it.
func DebianKernelDeb(t testing.TB) string {
	t.Helper()
	p, err := apttest.DebianKernel(context.Background())
	if errors.Is(err, apttest.ErrNoApt) {
		archivetest.RequireApt(t)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ModuleObject returns a little-endian ELF64 relocatable object for
// x86-64 whose .modinfo section holds modinfo, NUL-terminated
// "key=value" strings as the kernel build writes them ("name=ext4",
// "depends=jbd2,mbcache", "softdep=pre: crc32c", "alias=fs-ext4"), and a
// .text section with body, so that objects differ.
func ModuleObject(t testing.TB, body string, modinfo ...string) []byte {
	t.Helper()
	var info bytes.Buffer
	for _, kv := range modinfo {
		if !strings.Contains(kv, "=") || strings.ContainsRune(kv, 0) {
			t.Fatalf("modinfo entry %q is not key=value", kv)
		}
		info.WriteString(kv)
		info.WriteByte(0)
	}
	shstr := []byte("\x00.text\x00.modinfo\x00.shstrtab\x00")
	const ehsize, shentsize = 64, 64
	// Layout: header, .text, .modinfo, .shstrtab, section headers.
	textOff := uint64(ehsize)
	infoOff := textOff + uint64(len(body))
	strOff := infoOff + uint64(info.Len())
	shOff := (strOff + uint64(len(shstr)) + 7) &^ 7

	var out bytes.Buffer
	le := binary.LittleEndian
	hdr := elf.Header64{
		Type:      uint16(elf.ET_REL),
		Machine:   uint16(elf.EM_X86_64),
		Version:   uint32(elf.EV_CURRENT),
		Shoff:     shOff,
		Ehsize:    ehsize,
		Shentsize: shentsize,
		Shnum:     4,
		Shstrndx:  3,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	if err := binary.Write(&out, le, hdr); err != nil {
		t.Fatal(err)
	}
	out.WriteString(body)
	out.Write(info.Bytes())
	out.Write(shstr)
	out.Write(make([]byte, shOff-uint64(out.Len())))
	sections := []elf.Section64{
		{},
		{Name: 1, Type: uint32(elf.SHT_PROGBITS), Flags: uint64(elf.SHF_ALLOC | elf.SHF_EXECINSTR), Off: textOff, Size: uint64(len(body)), Addralign: 1},
		{Name: 7, Type: uint32(elf.SHT_PROGBITS), Flags: uint64(elf.SHF_ALLOC), Off: infoOff, Size: uint64(info.Len()), Addralign: 1},
		{Name: 16, Type: uint32(elf.SHT_STRTAB), Off: strOff, Size: uint64(len(shstr)), Addralign: 1},
	}
	for _, s := range sections {
		if err := binary.Write(&out, le, s); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}
