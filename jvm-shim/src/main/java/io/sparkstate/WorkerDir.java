package io.sparkstate;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.spark.SparkEnv;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A store worker's private directory (data socket, heartbeat file, stderr log) and the rules for where such
 * directories live and when a leftover one is removed.
 *
 * <pre>
 *   &lt;base&gt;/sparkstate-w-&lt;uid&gt;/        the root: this user's, 0700
 *       &lt;8 hex&gt;/                          one worker's directory, 0700
 *           owner.lock                     locked (fcntl) by the JVM that started the worker, while it lives
 *           data.sock, heartbeat, stderr.log
 *       .new-&lt;8 hex&gt;/                     a directory being made; renamed to &lt;8 hex&gt; once its lock is held
 * </pre>
 *
 * <p><b>Base.</b> The application's scratch space as Spark finds it ({@code Utils.getConfiguredLocalDirs}):
 * YARN's {@code LOCAL_DIRS}, a standalone worker's {@code SPARK_EXECUTOR_DIRS}, {@code SPARK_LOCAL_DIRS}
 * (Kubernetes mounts an emptyDir there), {@code spark.local.dir}, else {@code java.io.tmpdir}: the first
 * existing directory of the first of those that is set. The cluster manager deletes the first three when the
 * application ends. A Unix socket path holds at most {@value #MAX_SOCKET_PATH_BYTES} bytes, so when
 * {@code <base>/sparkstate-w-<uid>/<8 hex>/data.sock} would be longer, the base is {@code java.io.tmpdir},
 * else {@code /tmp}, the first with which it fits.
 *
 * <p><b>Reclaim.</b> A JVM killed with SIGKILL cannot delete its workers' directories (its workers exit on
 * their stdin's EOF). Every worker start removes the directories under its root whose {@code owner.lock} it
 * can lock, since the kernel drops a dead JVM's locks; a live JVM's lock makes it skip the directory.
 * Directories this JVM owns are never opened (closing any channel of a file drops this process's fcntl
 * locks on it), and a {@code .new-} directory is removed only when older than {@link #UNOWNED_GRACE_MS}.
 */
final class WorkerDir {
  private static final Logger LOG = LoggerFactory.getLogger(WorkerDir.class);
  /** sun_path is 108 bytes on Linux, with the terminating NUL. */
  static final int MAX_SOCKET_PATH_BYTES = 107;
  static final String SOCKET_NAME = "data.sock";
  static final String OWNER_LOCK = "owner.lock";
  static final long UNOWNED_GRACE_MS = 600_000;
  private static final Pattern OWNED_NAME = Pattern.compile("[0-9a-f]{8}");
  private static final String NEW_PREFIX = ".new-";
  private static final Set<PosixFilePermission> PRIVATE = PosixFilePermissions.fromString("rwx------");
  /** Directories of this JVM's live workers: never opened by a reclaim. */
  private static final Set<Path> OWNED = ConcurrentHashMap.newKeySet();
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final AtomicBoolean FALLBACK_LOGGED = new AtomicBoolean();

  private final Path path;
  private final FileChannel lockChannel;

  private WorkerDir(Path path, FileChannel lockChannel) {
    this.path = path;
    this.lockChannel = lockChannel;
  }

  Path path() {
    return path;
  }

  /** A new worker's directory under this JVM's root (see the class doc). */
  static WorkerDir create() throws IOException {
    return createUnder(privateRoot(chooseBase(System.getenv(), sparkLocalDir(),
        System.getProperty("java.io.tmpdir"), rootName())));
  }

  /** Reclaims dead workers' directories under {@code root}, then makes and locks a new one there. */
  static WorkerDir createUnder(Path root) throws IOException {
    reclaimDead(root);
    return createIn(root);
  }

  /** A new locked directory under {@code root} (which must exist). */
  static WorkerDir createIn(Path root) throws IOException {
    for (int attempt = 0; ; attempt++) {
      String name = HexFormat.of().formatHex(randomBytes(4));
      Path target = root.resolve(name);
      Path fresh = root.resolve(NEW_PREFIX + name);
      if (Files.exists(target, LinkOption.NOFOLLOW_LINKS)) {
        continue;
      }
      try {
        Files.createDirectory(fresh, PosixFilePermissions.asFileAttribute(PRIVATE));
      } catch (FileAlreadyExistsException e) {
        if (attempt < 10) {
          continue;
        }
        throw e;
      }
      FileChannel channel = null;
      try {
        channel = FileChannel.open(fresh.resolve(OWNER_LOCK), StandardOpenOption.CREATE_NEW,
            StandardOpenOption.WRITE);
        channel.lock();
        OWNED.add(target);
        Files.move(fresh, target, StandardCopyOption.ATOMIC_MOVE);
        return new WorkerDir(target, channel);
      } catch (IOException | RuntimeException e) {
        OWNED.remove(target);
        if (channel != null) {
          channel.close();
        }
        deleteTree(fresh);
        throw e;
      }
    }
  }

  /** Deletes the directory, then drops its lock. */
  void delete() {
    deleteTree(path);
    try {
      lockChannel.close();
    } catch (IOException ignored) {
      // closing drops the lock either way
    }
    OWNED.remove(path);
  }

  /**
   * The base for worker directories (see the class doc): the first configured scratch directory when the
   * socket path fits under it, else {@code tmpdir}, else {@code /tmp}.
   */
  static Path chooseBase(Map<String, String> env, String sparkLocalDir, String tmpdir, String rootName) {
    List<String> candidates = new ArrayList<>();
    String configured = configuredScratchDir(env, sparkLocalDir);
    if (configured != null) {
      candidates.add(configured);
    }
    if (tmpdir != null && !tmpdir.isBlank()) {
      candidates.add(tmpdir);
    }
    candidates.add("/tmp");
    for (String candidate : candidates) {
      Path base = Paths.get(candidate).toAbsolutePath().normalize();
      if (socketPathBytes(base, rootName) <= MAX_SOCKET_PATH_BYTES) {
        if (!candidate.equals(candidates.get(0)) && !FALLBACK_LOGGED.getAndSet(true)) {
          LOG.info("sparkstate: worker directories go under {}: a Unix socket under {} would be longer than {} "
              + "bytes", base, candidates.get(0), MAX_SOCKET_PATH_BYTES);
        }
        return base;
      }
    }
    return Paths.get("/tmp");
  }

  /** Spark's order of configured local directories, first existing directory of the first that is set. */
  static String configuredScratchDir(Map<String, String> env, String sparkLocalDir) {
    String[][] sources = {
        {env.get("CONTAINER_ID") != null ? env.get("LOCAL_DIRS") : null, ","},
        {env.get("SPARK_EXECUTOR_DIRS"), java.io.File.pathSeparator},
        {env.get("SPARK_LOCAL_DIRS"), ","},
        {sparkLocalDir, ","}};
    for (String[] source : sources) {
      if (source[0] == null || source[0].isBlank()) {
        continue;
      }
      for (String entry : source[0].split(Pattern.quote(source[1]))) {
        if (!entry.isBlank() && Files.isDirectory(Paths.get(entry.trim()))) {
          return entry.trim();
        }
      }
    }
    return null;
  }

  static int socketPathBytes(Path base, String rootName) {
    String socket = base.resolve(rootName).resolve("01234567").resolve(SOCKET_NAME).toString();
    return socket.getBytes(StandardCharsets.UTF_8).length;
  }

  /** {@code sparkstate-w-<uid>}: one root per user, so one user's reclaim never meets another's files. */
  static String rootName() {
    Long uid = currentUid();
    return "sparkstate-w-" + (uid != null ? uid.toString()
        : System.getProperty("user.name", "user").replaceAll("[^A-Za-z0-9._-]", "_"));
  }

  private static Long currentUid() {
    try {
      return new com.sun.security.auth.module.UnixSystem().getUid();
    } catch (LinkageError | RuntimeException e) {
      return null;
    }
  }

  private static String sparkLocalDir() {
    SparkEnv env = SparkEnv.get();
    if (env == null) {
      return null;
    }
    scala.Option<String> dir = env.conf().getOption("spark.local.dir");
    return dir.isDefined() ? dir.get() : null;
  }

  /** {@code base/rootName}, made 0700 when missing; an existing one must be a directory of this user's. */
  static Path privateRoot(Path base) throws IOException {
    Path root = base.resolve(rootName());
    Files.createDirectories(base);
    try {
      Files.createDirectory(root, PosixFilePermissions.asFileAttribute(PRIVATE));
    } catch (FileAlreadyExistsException e) {
      Long uid = currentUid();
      if (!Files.isDirectory(root, LinkOption.NOFOLLOW_LINKS) || (uid != null
          && ((Number) Files.getAttribute(root, "unix:uid", LinkOption.NOFOLLOW_LINKS)).longValue() != uid)) {
        throw new IOException(root + " exists but is not a directory of this user's: remove it");
      }
    }
    if (!Files.getPosixFilePermissions(root, LinkOption.NOFOLLOW_LINKS).equals(PRIVATE)) {
      Files.setPosixFilePermissions(root, PRIVATE);
    }
    return root;
  }

  /**
   * Removes the directories under {@code root} whose owner JVM is gone (see the class doc); returns them.
   * Never blocks: a held lock is skipped at once.
   */
  static List<Path> reclaimDead(Path root) {
    List<Path> removed = new ArrayList<>();
    List<Path> entries;
    try (Stream<Path> list = Files.list(root)) {
      entries = list.toList();
    } catch (IOException e) {
      return removed;
    }
    for (Path entry : entries) {
      String name = entry.getFileName().toString();
      try {
        if (OWNED_NAME.matcher(name).matches() && !OWNED.contains(entry) && ownerIsGone(entry)) {
          removed.add(entry);
        } else if (name.startsWith(NEW_PREFIX) && !OWNED.contains(root.resolve(name.substring(NEW_PREFIX.length())))
            && System.currentTimeMillis() - Files.getLastModifiedTime(entry, LinkOption.NOFOLLOW_LINKS).toMillis()
            > UNOWNED_GRACE_MS) {
          deleteTree(entry);
          removed.add(entry);
        }
      } catch (IOException | RuntimeException e) {
        LOG.debug("sparkstate: not reclaiming {}: {}", entry, e.toString());
      }
    }
    if (!removed.isEmpty()) {
      LOG.info("sparkstate: removed {} directories of store workers whose JVM is gone, under {}", removed.size(),
          root);
    }
    return removed;
  }

  /** Locks the directory's owner.lock if nobody holds it, and deletes the directory while holding it. */
  private static boolean ownerIsGone(Path dir) throws IOException {
    if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
      return false;
    }
    Path lockFile = dir.resolve(OWNER_LOCK);
    if (!Files.exists(lockFile, LinkOption.NOFOLLOW_LINKS)) {
      // made by createIn with its lock inside; without one it is a half-deleted directory of a dead owner
      deleteTree(dir);
      return true;
    }
    try (FileChannel channel = FileChannel.open(lockFile, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS)) {
      FileLock lock;
      try {
        lock = channel.tryLock();
      } catch (OverlappingFileLockException e) {
        return false; // another thread of this JVM is reclaiming it
      }
      if (lock == null) {
        return false; // a live JVM holds it
      }
      deleteTree(dir);
      return true;
    }
  }

  static void deleteTree(Path dir) {
    try (Stream<Path> paths = Files.walk(dir)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException | RuntimeException ignored) {
      // best effort: the next reclaim retries what is left
    }
  }

  private static byte[] randomBytes(int n) {
    byte[] bytes = new byte[n];
    RANDOM.nextBytes(bytes);
    return bytes;
  }
}
