//go:build !linux && !darwin

package memsync

import "io/fs"

// statOf is what a file's stat says of its content where no inode or
// change time is at hand: its size and modification time.
func statOf(fi fs.FileInfo) fileStat {
	return fileStat{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}
