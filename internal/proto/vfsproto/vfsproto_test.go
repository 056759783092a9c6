package vfsproto

import "testing"

func TestMountData(t *testing.T) {
	got, err := MountData(5, 5, 0, "")
	want := "trans=fd,rfdno=5,wfdno=5,version=9p2000.L,msize=524288,access=client,cache=mmap"
	if err != nil || got != want {
		t.Errorf("MountData(5, 5, 0, \"\") = %q, %v; want %q", got, err, want)
	}
	if got, _ := MountData(3, 4, 1<<30, CacheLoose); got != "trans=fd,rfdno=3,wfdno=4,version=9p2000.L,msize=524288,access=client,cache=loose" {
		t.Errorf("an msize above MaxMsize is lowered: %q", got)
	}
	if _, err := MountData(3, 3, 0, "fscache,posixacl"); err == nil {
		t.Errorf("a cache mode with extra options was accepted")
	}
}

func TestPortName(t *testing.T) {
	if got := PortName(2); got != "sbx.vfs.2" {
		t.Errorf("PortName(2) = %q", got)
	}
}
