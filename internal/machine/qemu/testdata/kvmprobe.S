/*
 * The KVM probe guest (see kvmprobe.go): a multiboot kernel in the a.out
 * kludge layout, loaded at 1 MiB. It writes "P" to the debug console
 * (port 0x402) from 32-bit protected mode, builds identity page tables,
 * enters 64-bit long mode and writes "L", counts down 16 Mi iterations and
 * writes "D\n", then writes 0x31 to isa-debug-exit (port 0xf4) so that
 * QEMU exits with status (0x31 << 1) | 1 = 99.
 *
 * Rebuild (the test TestKVMProbeGuestMatchesSource does this and compares):
 *   as --64 -o kvmprobe.o kvmprobe.S
 *   ld -m elf_x86_64 -Ttext=0x100000 --oformat binary -o kvmprobe.bin kvmprobe.o
 */
	.text
	.code32
	.globl _start
_start:
header:
	.long 0x1BADB002                   /* multiboot magic */
	.long 0x00010000                   /* flags: addresses below are valid */
	.long -(0x1BADB002 + 0x00010000)   /* checksum */
	.long header                       /* header_addr */
	.long header                       /* load_addr */
	.long end                          /* load_end_addr */
	.long bss_end                      /* bss_end_addr */
	.long entry                        /* entry_addr */
entry:
	cli
	mov $0x402, %dx
	mov $'P', %al
	out %al, %dx
	mov $pml4, %edi                    /* zero the three page tables */
	xor %eax, %eax
	mov $(3*4096/4), %ecx
	rep stosl
	movl $(pdpt + 3), pml4             /* present, writable */
	movl $(pd + 3), pdpt
	movl $0x83, pd                     /* one 2 MiB page at 0 */
	mov $pml4, %eax
	mov %eax, %cr3
	mov %cr4, %eax
	or $0x20, %eax                     /* PAE */
	mov %eax, %cr4
	mov $0xC0000080, %ecx              /* EFER.LME */
	rdmsr
	or $0x100, %eax
	wrmsr
	mov %cr0, %eax
	or $0x80000001, %eax               /* PG and PE */
	mov %eax, %cr0
	lgdt gdtr
	ljmp $8, $long
	.code64
long:
	mov $0x402, %dx
	mov $'L', %al
	out %al, %dx
	mov $0x1000000, %ecx
1:	dec %ecx
	jnz 1b
	mov $'D', %al
	out %al, %dx
	mov $'\n', %al
	out %al, %dx
	mov $0xf4, %dx
	mov $0x31, %al
	out %al, %dx
2:	hlt
	jmp 2b
	.align 8
gdt:
	.quad 0
	.quad 0x00209A0000000000           /* 64-bit code segment */
gdtr:
	.word gdtr - gdt - 1
	.long gdt
end:
	.bss
	.align 4096
pml4:	.skip 4096
pdpt:	.skip 4096
pd:	.skip 4096
bss_end:
