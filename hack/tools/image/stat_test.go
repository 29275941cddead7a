package main

import (
	"os"
	"syscall"
)

// statOwner is the uid of fi, where the platform tells it.
func statOwner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
