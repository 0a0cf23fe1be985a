package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// releaseStartupPages unmaps the pages of the executable's code and
// read-only data that this process has faulted in, so that only the pages
// it touches from now on come back (minor faults, from the page cache).
// Started, the sidecar has touched nearly every 64 KiB of its code and
// function tables: each package's init, the flags, the configuration; the
// scrape loop then uses about a third of them
// (docs/performance.md#the-executables-pages-released-once-started).
// It returns the bytes of the mappings released.
func releaseStartupPages() (int64, error) {
	fi, err := os.Stat("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, errors.New("no device and inode for /proc/self/exe")
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	var released int64
	for _, s := range cleanFileMappings(smaps, devMajor(uint64(st.Dev)), devMinor(uint64(st.Dev)), uint64(st.Ino)) {
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, s.start, s.end-s.start, syscall.MADV_DONTNEED); e != 0 {
			return released, e
		}
		released += int64(s.end - s.start)
	}
	return released, nil
}

type addrRange struct{ start, end uintptr }

// cleanFileMappings returns the private read-only mappings of the file
// (major:minor inode) in smaps that hold no anonymous page. MADV_DONTNEED
// on a private mapping drops its copied-on-write pages and the next read
// sees the file's bytes again: a relocated read-only segment (a PIE's
// .data.rel.ro) would lose its relocations, so any mapping with an
// anonymous page is left alone, and writable ones always are.
func cleanFileMappings(smaps []byte, major, minor uint32, ino uint64) []addrRange {
	var out []addrRange
	var cur addrRange
	candidate := false
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 5 && len(f[1]) == 4 && strings.Contains(f[0], "-") {
			if candidate {
				out = append(out, cur)
			}
			candidate = false
			lo, hi, _ := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			maj, mnr, _ := strings.Cut(f[3], ":")
			dmaj, err3 := strconv.ParseUint(maj, 16, 32)
			dmin, err4 := strconv.ParseUint(mnr, 16, 32)
			node, err5 := strconv.ParseUint(f[4], 10, 64)
			if errors.Join(err1, err2, err3, err4, err5) != nil {
				continue
			}
			perm := f[1]
			candidate = node == ino && uint32(dmaj) == major && uint32(dmin) == minor &&
				perm[0] == 'r' && perm[1] == '-' && perm[3] == 'p' && end > start
			cur = addrRange{uintptr(start), uintptr(end)}
			continue
		}
		if candidate && len(f) >= 2 && f[0] == "Anonymous:" && f[1] != "0" {
			candidate = false
		}
	}
	if candidate {
		out = append(out, cur)
	}
	return out
}

// devMajor and devMinor split a Linux dev_t as the kernel's
// new_encode_dev packs it.
func devMajor(dev uint64) uint32 { return uint32((dev>>8)&0xfff) | uint32((dev>>32)&^0xfff) }
func devMinor(dev uint64) uint32 { return uint32(dev&0xff) | uint32((dev>>12)&^0xff) }
