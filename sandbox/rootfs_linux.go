package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// systemDirs are bound read-only from the host (or recreated as the
// symlinks they are on merged-/usr systems).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcEntries are the parts of the host's /etc that programs need. Nothing
// else of /etc is visible: not shadow, not the host's keys and
// configuration.
var etcEntries = []string{
	"alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf", "debian_version",
	"fonts", "gai.conf", "gitconfig", "host.conf", "inputrc", "java-17-openjdk", "ld.so.cache",
	"ld.so.conf", "ld.so.conf.d", "locale.alias", "localtime", "magic", "magic.mime",
	"mime.types", "nsswitch.conf", "os-release", "perl", "profile", "protocols", "python3",
	"python3.11", "rpc", "services", "ssl", "terminfo", "timezone", "vim", "xdg",
}

// devices are bound from the host's /dev into the sandbox's own /dev.
var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// newRoot is where init assembles the sandbox's root before pivot_root.
// It is a directory every host has; the tmpfs mounted on it lives only in
// the sandbox's mount namespace.
const newRoot = "/tmp"

// setupRoot builds the sandbox's file system and makes it the root. ws
// is the workspace directory and binds the sources of cfg.Binds (open
// descriptors).
func setupRoot(cfg *initConfig, ws *os.File, binds []*os.File) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=8m"); err != nil {
		return fmt.Errorf("root tmpfs: %w", err)
	}
	steps := []func() error{
		bindSystem,
		func() error { return makeEtc(cfg) },
		func() error { return bindWorkspace(ws, cfg.ReadOnly) },
		func() error { return bindExtra(cfg.Binds, binds[:len(cfg.Binds)]) },
		func() error { return mountMemory(cfg, binds[len(cfg.Binds):]) },
		linkOutputs,
		func() error { return makeTmp(cfg.Limits.TmpBytes) },
		func() error { return makeDev(cfg.Limits.TmpBytes) },
		makeProc,
		pivot,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	// The root itself (its directories, /etc's generated files) is read-only.
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("read-only root: %w", err)
	}
	return nil
}

func inRoot(p string) string { return filepath.Join(newRoot, p) }

func bindSystem() error {
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(d)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, inRoot(d)); err != nil {
				return err
			}
			continue
		}
		if err := bindRO(d, inRoot(d), true); err != nil {
			return err
		}
	}
	return nil
}

// bindRO binds src on dst (created as a directory or an empty file like
// src) read-only, without set-user-ID programs or devices.
func bindRO(src, dst string, dir bool) error {
	if err := mkTarget(dst, dir); err != nil {
		return err
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	return remount(dst, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV)
}

// remount applies flags to the bind mount at dst, keeping the flags the
// kernel locks on mounts that came from another user namespace.
func remount(dst string, flags uintptr) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dst, err)
	}
	locked := map[int64]uintptr{unix.ST_NOEXEC: unix.MS_NOEXEC, unix.ST_NOATIME: unix.MS_NOATIME,
		unix.ST_NODIRATIME: unix.MS_NODIRATIME, unix.ST_RELATIME: unix.MS_RELATIME, unix.ST_RDONLY: unix.MS_RDONLY}
	for stf, ms := range locked {
		if int64(st.Flags)&stf != 0 {
			flags |= ms
		}
	}
	if err := unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|flags, ""); err != nil {
		return fmt.Errorf("remount %s: %w", dst, err)
	}
	return nil
}

func mkTarget(p string, dir bool) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if dir {
		return os.Mkdir(p, 0o755)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// makeEtc binds the allowed parts of the host's /etc and writes the
// sandbox's own passwd, group, hosts, hostname and resolv.conf.
func makeEtc(cfg *initConfig) error {
	if err := os.Mkdir(inRoot("/etc"), 0o755); err != nil {
		return err
	}
	for _, e := range etcEntries {
		src := filepath.Join("/etc", e)
		fi, err := os.Lstat(src)
		if err != nil {
			continue
		}
		dst := inRoot(src)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, dst)
			}
			if err != nil {
				return err
			}
		case fi.IsDir() || fi.Mode().IsRegular():
			if err := bindRO(src, dst, fi.IsDir()); err != nil {
				return err
			}
		}
	}
	uid, gid := strconv.Itoa(UID), strconv.Itoa(GID)
	files := map[string]string{
		"passwd":      "root:x:0:0:root:/root:/usr/sbin/nologin\n" + User + ":x:" + uid + ":" + gid + ":sandbox user:" + WorkspaceDir + ":/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"group":       "root:x:0:\n" + User + ":x:" + gid + ":\nnogroup:x:65534:\n",
		"hosts":       "127.0.0.1\tlocalhost " + cfg.Hostname + "\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"hostname":    cfg.Hostname + "\n",
		"resolv.conf": "# No DNS inside a reins sandbox: programs reach the network through the\n# HTTP proxy in $HTTPS_PROXY, which resolves names itself.\n",
	}
	for name, body := range files {
		if err := os.WriteFile(inRoot("/etc/"+name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	if cfg.ExtraCA != "" {
		return trustCA(cfg.ExtraCA)
	}
	return nil
}

// systemBundle is where Debian-like systems keep their trusted roots.
const systemBundle = "/etc/ssl/certs/ca-certificates.crt"

// trustCA writes CABundle (the host's roots and ca) and puts it over the
// system bundle, so that programs that read either trust ca.
func trustCA(ca string) error {
	host, _ := os.ReadFile(systemBundle)
	bundle := append(append(host, '\n'), ca...)
	if err := os.MkdirAll(filepath.Dir(inRoot(CABundle)), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(inRoot(CABundle), bundle, 0o644); err != nil {
		return err
	}
	if _, err := os.Stat(inRoot(systemBundle)); err != nil {
		return nil // no system bundle to cover: the variables point at CABundle
	}
	if err := unix.Mount(inRoot(CABundle), inRoot(systemBundle), "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind the CA bundle: %w", err)
	}
	return remount(inRoot(systemBundle), unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV)
}

func bindWorkspace(ws *os.File, readOnly bool) error {
	dst := inRoot(WorkspaceDir)
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(fdPath(ws), dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind the workspace: %w", err)
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	return remount(dst, flags)
}

// linkOutputs makes SessionOutputs a symbolic link to the workspace's
// outputs directory.
func linkOutputs() error {
	link := inRoot(SessionOutputs)
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return err
	}
	return os.Symlink(filepath.Join(WorkspaceDir, OutputsDir), link)
}

// bindExtra binds each source (an open descriptor) read-only on its
// target.
func bindExtra(binds []Bind, srcs []*os.File) error {
	for i, b := range binds {
		if err := bindRO(fdPath(srcs[i]), inRoot(b.Target), true); err != nil {
			return fmt.Errorf("%s: %w", b.Target, err)
		}
	}
	return nil
}

// mountMemory mounts a scratch tmpfs at MemoryDir and each memory
// mount's source (an open descriptor) on its directory there, read-only
// for a read-only mount.
func mountMemory(cfg *initConfig, srcs []*os.File) error {
	if len(cfg.Memory) == 0 {
		return nil
	}
	dir := inRoot(MemoryDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	opts := fmt.Sprintf("mode=1777,size=%d", cfg.Limits.TmpBytes)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("%s: %w", MemoryDir, err)
	}
	for i, m := range cfg.Memory {
		dst := filepath.Join(dir, m.Name)
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(fdPath(srcs[i]), dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("memory %s: %w", m.Name, err)
		}
		flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
		if m.ReadOnly {
			flags |= unix.MS_RDONLY
		}
		if err := remount(dst, flags); err != nil {
			return err
		}
	}
	return nil
}

func fdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

func makeTmp(size int64) error {
	for _, d := range []string{"/tmp", "/var/tmp", "/run"} {
		if err := os.MkdirAll(inRoot(d), 0o755); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("mode=1777,size=%d", size)
	if err := unix.Mount("tmpfs", inRoot("/tmp"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("/tmp: %w", err)
	}
	if err := unix.Mount(inRoot("/tmp"), inRoot("/var/tmp"), "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("/var/tmp: %w", err)
	}
	return nil
}

// makeDev builds a minimal /dev: a few host devices bound in, a private
// devpts, a private /dev/shm.
func makeDev(shmSize int64) error {
	dev := inRoot("/dev")
	if err := os.Mkdir(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("/dev: %w", err)
	}
	for _, d := range devices {
		dst := filepath.Join(dev, d)
		if err := mkTarget(dst, false); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+d, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", d, err)
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(filepath.Join(dev, d), 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("/dev/pts: %w", err)
	}
	opts := fmt.Sprintf("mode=1777,size=%d", shmSize)
	if err := unix.Mount("tmpfs", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("/dev/shm: %w", err)
	}
	links := map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return nil
}

// makeProc mounts a /proc of the sandbox's own PID namespace: it shows only
// the sandbox's processes.
func makeProc() error {
	p := inRoot("/proc")
	if err := os.Mkdir(p, 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", p, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("/proc: %w", err)
	}
	return nil
}

// pivot makes the new root the root and detaches the host's file system.
func pivot() error {
	if err := unix.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if _, err := os.Stat("/etc/shadow"); !errors.Is(err, os.ErrNotExist) {
		return errors.New("the host's /etc/shadow is still visible after pivot_root")
	}
	return nil
}
