package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestCleanFileMappings(t *testing.T) {
	// An executable on 103:02 inode 7: code, read-only data, a read-only
	// segment with relocated (copied-on-write) pages, the data segment; a
	// library with the same inode on another device; a shared mapping.
	smaps := `00400000-00c0b000 r-xp 00000000 103:02 7                                  /usr/bin/vllm-normalizer
Rss:                7204 kB
Anonymous:             0 kB
00c0b000-01492000 r--p 0080b000 103:02 7                                  /usr/bin/vllm-normalizer
Rss:                7452 kB
Anonymous:             0 kB
01492000-01493000 r--p 01092000 103:02 7                                  /usr/bin/vllm-normalizer
Rss:                   4 kB
Anonymous:             4 kB
01493000-01546000 rw-p 01093000 103:02 7                                  /usr/bin/vllm-normalizer
Rss:                 656 kB
Anonymous:           128 kB
7f0000000000-7f0000010000 r-xp 00000000 103:03 7                          /lib/other.so
Anonymous:             0 kB
7f0000020000-7f0000030000 r--s 00000000 103:02 7                          /usr/bin/vllm-normalizer
Anonymous:             0 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
Anonymous:           132 kB
`
	got := cleanFileMappings([]byte(smaps), 0x103, 2, 7)
	want := []addrRange{{0x400000, 0xc0b000}, {0xc0b000, 0x1492000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("cleanFileMappings = %x, want %x (the code and the read-only data without copied pages only)", got, want)
	}
}

func TestDevNumbers(t *testing.T) {
	// makedev(259, 2) and makedev(8, 1048577) as glibc packs them.
	for _, c := range []struct {
		dev          uint64
		major, minor uint32
	}{{0x10302, 259, 2}, {0x100000801, 8, 1048577}} {
		if devMajor(c.dev) != c.major || devMinor(c.dev) != c.minor {
			t.Errorf("dev %#x: %d:%d, want %d:%d", c.dev, devMajor(c.dev), devMinor(c.dev), c.major, c.minor)
		}
	}
}

// written is set before the release and read after: the data segment is
// private and written, and releasing it would read the file's zero back.
var written int

func TestReleaseStartupPages(t *testing.T) {
	written = 42
	before := statusKiB(t, "RssFile")
	n, err := releaseStartupPages()
	if err != nil {
		t.Fatal(err)
	}
	after := statusKiB(t, "RssFile")
	// The test binary's code and tables are several MiB; started, most of
	// them are resident.
	if n < 1<<20 {
		t.Errorf("released %d bytes, want the executable's code and read-only data (several MiB)", n)
	}
	if after > before-1024 {
		t.Errorf("RssFile %d KiB before the release and %d after, want at least 1 MiB less", before, after)
	}
	// Code, constants and tables read back from the page cache, the
	// written data kept.
	if !regexp.MustCompile(`^vllm:(\w+)_total$`).MatchString("vllm:num_preemptions_total") || strings.ToUpper("ok") != "OK" {
		t.Error("code or read-only data wrong after the release")
	}
	if written != 42 {
		t.Errorf("a written global reads %d after the release, want 42: a writable mapping was released", written)
	}
}

func statusKiB(t *testing.T, key string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", key)
	return 0
}
