package memsync

import (
	"io/fs"
	"syscall"
)

// statOf is what a file's stat says of its content: inode, size and the
// modification and change times (named Mtimespec and Ctimespec here).
func statOf(fi fs.FileInfo) fileStat {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	}
	return fileStat{ino: int64(st.Ino), size: st.Size, mtime: st.Mtimespec.Nano(), ctime: st.Ctimespec.Nano()}
}
