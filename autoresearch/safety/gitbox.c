/* gitbox: runs one program (the harness's git) confined by Landlock and seccomp, with no
 * namespace and no mount, so nothing of it is visible to other processes on the host.
 *
 *   gitbox --abi                      print the kernel's Landlock ABI (0: none) and exit
 *   gitbox [-k] [-r PATH]... [-w PATH]... [-e NAME=VALUE]... [-x N]... [-m K]... -- PROGRAM ARGS...
 *
 * -r PATH: PATH (a folder and what is below it, or a file) may be read and executed.
 * -w PATH: PATH may be read, executed and changed.  Nothing else may be opened at all,
 *          whatever its mode and whoever we are (Landlock ignores capabilities).
 * -e:      NAME is VALUE in the program's environment (its own HOME and TMPDIR).
 * -x N:    a batch: what follows `--` is several programs in a row, the next one N words
 *          long (one -x per program; without any, the whole rest is one). They run one
 *          after another in the same box, each one's stdout but the last's thrown away,
 *          and the batch stops at the first that fails, unless it was marked by -m K
 *          (K: its place, from 0). The exit status is the last program's that ran. One
 *          box for the calls of a batch: a box's start costs as much as a small git call.
 * -k:      as root, keep CAP_DAC_OVERRIDE and CAP_FOWNER (git must change the files a
 *          command left in the worktree as nobody); every other capability is dropped
 *          from the bounding set, so no program started later gets one back.
 * Besides the files: no TCP bind or connect (Landlock), no socket of any family and no
 * io_uring, namespace, mount, ptrace, bpf, keyring or System V IPC call, no change of a
 * file's mode, owner or attributes by path, no other process's limits (seccomp), no
 * signal to a process outside the box and no abstract unix socket (Landlock scopes).
 * PROGRAM runs as our child; when it ends, whatever it left running in the box is killed,
 * and so is the whole box when we get SIGTERM or our parent (the harness) dies.
 * A path that does not exist is skipped.  Any failure to set the box up: one line on
 * stderr and exit 125; the program never runs unconfined.  Needs Landlock ABI 6. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NEEDED_ABI 6
#define FAILED 125
#define MAX_PROGRAMS 16

/* Landlock's interface, written out: the build host's headers may predate ABI 6. */
struct ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};
struct path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));
#define RULE_PATH_BENEATH 1
#define CREATE_RULESET_VERSION 1U
#define FS_EXECUTE (1ULL << 0)
#define FS_WRITE_FILE (1ULL << 1)
#define FS_READ_FILE (1ULL << 2)
#define FS_READ_DIR (1ULL << 3)
#define FS_ALL_ABI1 ((1ULL << 13) - 1)
#define FS_REFER (1ULL << 13)    /* ABI 2 */
#define FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#define FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#define FS_FILE_ONLY (FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV)
#define NET_BIND_TCP (1ULL << 0)
#define NET_CONNECT_TCP (1ULL << 1)
#define SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define SCOPE_SIGNAL (1ULL << 1)
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#define X32_BIT 0x40000000u
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#define X32_BIT 0u
#else
#error "gitbox knows the system calls of x86_64 and aarch64 only"
#endif

/* Whether kill(-1) reaches only this box: our parent, outside it, must be out of reach. */
static int scoped(void) { return kill(getppid(), 0) < 0 && errno == EPERM; }

/* The harness died or gave up on the call (SIGTERM): the box ends with us. */
static void end_box(int sig) {
    int saved = errno;
    if (scoped())
        kill(-1, SIGKILL);
    errno = saved;
    _exit(128 + sig);
}

static void die(const char *what) {
    fprintf(stderr, "gitbox: %s: %s\n", what, strerror(errno));
    exit(FAILED);
}

static long abi(void) {
    long v = syscall(__NR_landlock_create_ruleset, NULL, 0, CREATE_RULESET_VERSION);
    return v < 0 ? 0 : v;
}

static void allow(int ruleset, const char *path, uint64_t rights) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return;
        die(path);
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
        die(path);
    if (!S_ISDIR(st.st_mode))
        rights &= FS_FILE_ONLY;
    struct path_beneath_attr rule = {.allowed_access = rights, .parent_fd = fd};
    if (syscall(__NR_landlock_add_rule, ruleset, RULE_PATH_BENEATH, &rule, 0) < 0)
        die(path);
    close(fd);
}

static void drop_capabilities(int keep) {
    uint64_t kept = keep ? (1ULL << CAP_DAC_OVERRIDE) | (1ULL << CAP_FOWNER) : 0;
    if (geteuid() == 0) {
        /* The bounding set limits what root gets at exec: only the kept ones. */
        for (int cap = 0; cap <= 63; cap++) {
            if (kept & (1ULL << cap))
                continue;
            if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
                die("dropping a capability from the bounding set");
        }
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        die("clearing the ambient capabilities");
    struct __user_cap_header_struct head = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (geteuid() == 0) {
        data[0].effective = data[0].permitted = (uint32_t)kept;
        data[1].effective = data[1].permitted = (uint32_t)(kept >> 32);
    }
    if (syscall(SYS_capset, &head, data) < 0)
        die("setting the capabilities");
}

#define REFUSE(nr, err)                                                                   \
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1),                                      \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err))

static void install_seccomp(void) {
    const uint32_t namespaces = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
                                CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP;
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#if X32_BIT
        /* x32's numbers would bypass every comparison below. */
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_BIT, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
#endif
        /* No socket of any family: TCP, UDP, netlink, raw packets, and unix sockets, whose
         * named form (a daemon's socket file) Landlock does not cover. socketpair stays. */
        REFUSE(__NR_socket, EPERM),
        /* io_uring opens sockets and files past the checks above. */
        REFUSE(__NR_io_uring_setup, EPERM),
        REFUSE(__NR_io_uring_enter, EPERM),
        REFUSE(__NR_io_uring_register, EPERM),
        REFUSE(__NR_unshare, EPERM),
        REFUSE(__NR_setns, EPERM),
        REFUSE(__NR_mount, EPERM),
        REFUSE(__NR_umount2, EPERM),
        REFUSE(__NR_pivot_root, EPERM),
        REFUSE(__NR_open_tree, EPERM),
        REFUSE(__NR_move_mount, EPERM),
        REFUSE(__NR_fsopen, EPERM),
        REFUSE(__NR_fsmount, EPERM),
        REFUSE(__NR_ptrace, EPERM),
        REFUSE(__NR_process_vm_readv, EPERM),
        REFUSE(__NR_process_vm_writev, EPERM),
        REFUSE(__NR_bpf, EPERM),
        REFUSE(__NR_perf_event_open, EPERM),
        REFUSE(__NR_userfaultfd, EPERM),
        REFUSE(__NR_keyctl, EPERM),
        REFUSE(__NR_add_key, EPERM),
        REFUSE(__NR_request_key, EPERM),
        REFUSE(__NR_shmget, EPERM),
        REFUSE(__NR_msgget, EPERM),
        REFUSE(__NR_semget, EPERM),
        REFUSE(__NR_pidfd_getfd, EPERM),
        /* Landlock leaves a file's metadata alone, and root owns the host's files: changing
         * a mode, an owner or an attribute by path would reach /etc/shadow. git changes
         * modes through a file it opened (fchmod), which the box allowed it to open. */
#ifdef __NR_chmod
        REFUSE(__NR_chmod, EPERM),
#endif
        REFUSE(__NR_fchmodat, EPERM),
#ifdef __NR_fchmodat2
        REFUSE(__NR_fchmodat2, EPERM),
#else
        REFUSE(452, EPERM),
#endif
#ifdef __NR_chown
        REFUSE(__NR_chown, EPERM),
#endif
#ifdef __NR_lchown
        REFUSE(__NR_lchown, EPERM),
#endif
        REFUSE(__NR_fchownat, EPERM),
        REFUSE(__NR_setxattr, EPERM),
        REFUSE(__NR_lsetxattr, EPERM),
        REFUSE(__NR_removexattr, EPERM),
        REFUSE(__NR_lremovexattr, EPERM),
        REFUSE(463, EPERM), /* setxattrat */
        REFUSE(466, EPERM), /* removexattrat */
        /* Another process's limits: root may lower those of every root process. */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_prlimit64, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        /* clone3's flags are out of a filter's sight: ENOSYS makes libc use clone. */
        REFUSE(__NR_clone3, ENOSYS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, namespaces, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
        die("installing the seccomp filter");
}

/* One program of the box, as our child: its status. `quiet`: its stdout thrown away. The
 * words are argv[0..length) (the next program's follow: cut here, put back after). */
static int run(char **words, int length, int quiet, sigset_t *term) {
    char *next = words[length];
    words[length] = NULL;
    pid_t child = fork();
    if (child < 0)
        die("fork");
    if (child == 0) {
        signal(SIGTERM, SIG_DFL);
        sigprocmask(SIG_UNBLOCK, term, NULL);
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0); /* the harness killed us: git ends too */
        if (quiet) {
            int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
            if (null < 0 || dup2(null, 1) < 0)
                _exit(126);
        }
        execvp(words[0], words);
        fprintf(stderr, "gitbox: %s: %s\n", words[0], strerror(errno));
        _exit(127);
    }
    words[length] = next;
    int status = 0;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR)
            die("waiting for the program");
    return status;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--abi") == 0) {
        printf("%ld\n", abi());
        return 0;
    }
    long version = abi();
    if (version < NEEDED_ABI) {
        fprintf(stderr, "gitbox: this kernel's Landlock ABI is %ld, %d is needed\n", version,
                NEEDED_ABI);
        return FAILED;
    }
    uint64_t fs = FS_ALL_ABI1 | FS_REFER | FS_TRUNCATE | FS_IOCTL_DEV;
    struct ruleset_attr attr = {
        .handled_access_fs = fs,
        .handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP,
        .scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL,
    };
    int ruleset = syscall(__NR_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (ruleset < 0)
        die("creating the Landlock ruleset");
    pid_t parent = getppid();
    int keep = 0, i = 1, programs = 0;
    int lengths[MAX_PROGRAMS];
    int may_fail[MAX_PROGRAMS] = {0};
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (strcmp(argv[i], "-e") == 0 && i + 1 < argc && strchr(argv[i + 1], '=')) {
            if (putenv(argv[++i]) != 0)
                die("setting a variable");
        } else if (strcmp(argv[i], "-k") == 0) {
            keep = 1;
        } else if (strcmp(argv[i], "-x") == 0 && i + 1 < argc && programs < MAX_PROGRAMS) {
            lengths[programs] = atoi(argv[++i]);
            if (lengths[programs++] < 1) {
                fprintf(stderr, "gitbox: -x needs a length of 1 or more\n");
                return FAILED;
            }
        } else if (strcmp(argv[i], "-m") == 0 && i + 1 < argc) {
            int k = atoi(argv[++i]);
            if (k >= 0 && k < MAX_PROGRAMS)
                may_fail[k] = 1;
        } else if ((strcmp(argv[i], "-r") == 0 || strcmp(argv[i], "-w") == 0) && i + 1 < argc) {
            int write = argv[i][1] == 'w';
            allow(ruleset, argv[++i],
                  write ? fs : FS_EXECUTE | FS_READ_FILE | FS_READ_DIR);
        } else {
            fprintf(stderr, "gitbox: unknown argument %s\n", argv[i]);
            return FAILED;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "gitbox: no program given after --\n");
        return FAILED;
    }
    int total = 0;
    for (int n = 0; n < programs; n++)
        total += lengths[n];
    if (programs == 0) {
        lengths[programs++] = argc - i;
    } else if (total != argc - i) {
        fprintf(stderr, "gitbox: the -x lengths add up to %d words, %d follow --\n", total,
                argc - i);
        return FAILED;
    }
    drop_capabilities(keep);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        die("setting no_new_privs");
    install_seccomp();
    if (syscall(__NR_landlock_restrict_self, ruleset, 0) < 0)
        die("entering the Landlock domain");
    close(ruleset);
    /* The program runs as our child, and whatever it leaves running (a daemon a filter
     * started) ends with it: the bwrap jail's pid namespace did that. Orphans come to us
     * (subreaper), and kill(-1) reaches only the processes of this box (Landlock's signal
     * scope), never one outside it. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
        die("becoming the box's subreaper");
    /* SIGTERM waits until the program's start is over: from then on it ends the box. */
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, NULL);
    struct sigaction on_term = {.sa_handler = end_box};
    sigaction(SIGTERM, &on_term, NULL);
    if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) < 0)
        die("asking to hear of the harness's end");
    sigprocmask(SIG_UNBLOCK, &term, NULL);
    if (getppid() != parent)
        end_box(SIGTERM); /* it ended before we asked */
    int status = 0;
    for (int n = 0, at = i; n < programs; at += lengths[n++]) {
        status = run(argv + at, lengths[n], n < programs - 1, &term);
        /* What one program left running ends before the next starts, as between boxes. */
        if (scoped())
            kill(-1, SIGKILL);
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
            ;
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && !may_fail[n])
            break;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
