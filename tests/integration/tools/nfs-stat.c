/*
 * nfs-stat: stat a file or the file system through libnfs (libnfs-utils has
 * nfs-ls, nfs-cp and nfs-cat, but no stat tool). Build:
 *     gcc -O2 -Wall -o nfs-stat nfs-stat.c -lnfs
 * Usage:
 *     nfs-stat     nfs://HOST/EXPORT/PATH?nfsport=P&mountport=M   (lstat; GETATTR/LOOKUP)
 *     nfs-stat -f  nfs://HOST/EXPORT/PATH?...                      (statvfs; FSSTAT)
 *     nfs-stat -u  nfs://HOST/EXPORT/PATH?...                      (unlink; REMOVE, for cleanup)
 * Prints one line of key=value pairs; exits 1 with libnfs's error otherwise.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <nfsc/libnfs.h>

static const char *type_name(uint64_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "regular";
    case S_IFDIR: return "directory";
    case S_IFLNK: return "symlink";
    case S_IFCHR: return "chardev";
    case S_IFBLK: return "blockdev";
    case S_IFIFO: return "fifo";
    case S_IFSOCK: return "socket";
    default: return "unknown";
    }
}

int main(int argc, char **argv)
{
    int fs = argc == 3 && strcmp(argv[1], "-f") == 0;
    int rm = argc == 3 && strcmp(argv[1], "-u") == 0;
    if (argc != 2 + fs + rm) {
        fprintf(stderr, "usage: nfs-stat [-f|-u] nfs://HOST/EXPORT/PATH[?args]\n");
        return 2;
    }
    struct nfs_context *nfs = nfs_init_context();
    if (!nfs) {
        fprintf(stderr, "nfs-stat: cannot create an nfs context\n");
        return 1;
    }
    struct nfs_url *url = nfs_parse_url_full(nfs, argv[argc - 1]);
    if (!url) {
        fprintf(stderr, "nfs-stat: bad URL %s: %s\n", argv[argc - 1], nfs_get_error(nfs));
        return 1;
    }
    if (nfs_mount(nfs, url->server, url->path) != 0) {
        fprintf(stderr, "nfs-stat: mount %s:%s: %s\n", url->server, url->path, nfs_get_error(nfs));
        return 1;
    }
    int rc = 0;
    if (rm) {
        if (nfs_unlink(nfs, url->file) != 0) {
            fprintf(stderr, "nfs-stat: unlink %s: %s\n", url->file, nfs_get_error(nfs));
            rc = 1;
        }
    } else if (fs) {
        struct nfs_statvfs_64 sv;
        if (nfs_statvfs64(nfs, url->file, &sv) != 0) {
            fprintf(stderr, "nfs-stat: statvfs %s: %s\n", url->file, nfs_get_error(nfs));
            rc = 1;
        } else {
            printf("bsize=%" PRIu64 " blocks=%" PRIu64 " bfree=%" PRIu64 " bavail=%" PRIu64
                   " files=%" PRIu64 " ffree=%" PRIu64 " namemax=%" PRIu64 "\n",
                   sv.f_bsize, sv.f_blocks, sv.f_bfree, sv.f_bavail, sv.f_files, sv.f_ffree,
                   sv.f_namemax);
        }
    } else {
        struct nfs_stat_64 st;
        if (nfs_lstat64(nfs, url->file, &st) != 0) {
            fprintf(stderr, "nfs-stat: stat %s: %s\n", url->file, nfs_get_error(nfs));
            rc = 1;
        } else {
            printf("type=%s size=%" PRIu64 " mode=%04" PRIo64 " nlink=%" PRIu64 " uid=%" PRIu64
                   " gid=%" PRIu64 " ino=%" PRIu64 " mtime=%" PRIu64 "\n",
                   type_name(st.nfs_mode), st.nfs_size, st.nfs_mode & 07777, st.nfs_nlink,
                   st.nfs_uid, st.nfs_gid, st.nfs_ino, st.nfs_mtime);
        }
    }
    nfs_destroy_url(url);
    nfs_destroy_context(nfs);
    return rc;
}
