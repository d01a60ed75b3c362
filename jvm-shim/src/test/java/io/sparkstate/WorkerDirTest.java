package io.sparkstate;

import static io.sparkstate.ShimTests.check;
import static io.sparkstate.ShimTests.equal;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.FileTime;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Where worker directories go and which leftover ones a worker start removes. The owner of a directory is a
 * JVM; other JVMs are child processes of this test ({@link #main}), killed with SIGKILL as a cluster manager
 * or the kernel kills an executor.
 */
final class WorkerDirTest {
  /** A JVM that makes one worker directory under {@code args[0]}, prints its path and waits to be killed. */
  public static void main(String[] args) throws Exception {
    WorkerDir dir = WorkerDir.createIn(Paths.get(args[0]));
    System.out.println(dir.path());
    System.out.flush();
    Thread.sleep(600_000);
  }

  private static Process ownerJvm(Path root) throws IOException {
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    return new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), WorkerDirTest.class.getName(),
        root.toString()).redirectError(ProcessBuilder.Redirect.INHERIT).start();
  }

  private static Path pathOf(Process jvm) throws IOException {
    String line = new BufferedReader(new InputStreamReader(jvm.getInputStream(), StandardCharsets.UTF_8)).readLine();
    check(line != null, "the owner JVM printed no directory");
    return Paths.get(line);
  }

  public static void testADeadJvmsDirectoryIsRemovedAndALiveOnesIsNot() throws Exception {
    Path root = Files.createTempDirectory("workerdir-test");
    Process live = ownerJvm(root);
    Process killed = ownerJvm(root);
    try {
      Path liveDir = pathOf(live);
      Path killedDir = pathOf(killed);
      Files.writeString(killedDir.resolve("stderr.log"), "the worker's log");
      killed.destroyForcibly(); // SIGKILL: the JVM cannot delete its directory
      check(killed.waitFor(30, TimeUnit.SECONDS), "the killed JVM is gone");
      check(Files.isDirectory(killedDir), "a JVM killed with SIGKILL leaves its worker directory");

      WorkerDir mine = WorkerDir.createUnder(root); // a worker start
      check(!Files.exists(killedDir), "the next worker start removed the dead JVM's directory");
      check(Files.isDirectory(liveDir), "the live JVM's directory stays");
      check(Files.isDirectory(mine.path()), "this JVM's own directory stays");
      equal(List.of(), WorkerDir.reclaimDead(root), "a second reclaim finds nothing");
      check(live.isAlive(), "the owner is still running");
      mine.delete();
      check(!Files.exists(mine.path()), "delete removes the directory");
    } finally {
      live.destroyForcibly();
      killed.destroyForcibly();
      live.waitFor(30, TimeUnit.SECONDS);
      WorkerDir.deleteTree(root);
    }
  }

  public static void testAHalfMadeDirectoryIsRemovedOnlyWhenOld() throws Exception {
    Path root = Files.createTempDirectory("workerdir-test");
    try {
      Path fresh = Files.createDirectory(root.resolve(".new-0123abcd"));
      Path old = Files.createDirectory(root.resolve(".new-89abcdef"));
      Files.setLastModifiedTime(old, FileTime.fromMillis(System.currentTimeMillis() - WorkerDir.UNOWNED_GRACE_MS
          - 60_000));
      Path unrelated = Files.createDirectory(root.resolve("not-a-worker"));
      equal(List.of(old), WorkerDir.reclaimDead(root), "only the old half-made directory");
      check(Files.isDirectory(fresh) && Files.isDirectory(unrelated), "the others stay");
    } finally {
      WorkerDir.deleteTree(root);
    }
  }

  public static void testTheClusterManagersScratchDirComesFirst() throws Exception {
    Path yarn = Files.createTempDirectory("yarn");
    Path standalone = Files.createTempDirectory("exec");
    try {
      String name = "sparkstate-w-1000";
      equal(yarn, WorkerDir.chooseBase(Map.of("CONTAINER_ID", "c1", "LOCAL_DIRS", "/missing," + yarn,
          "SPARK_LOCAL_DIRS", standalone.toString()), null, "/var/tmp", name), "YARN's LOCAL_DIRS in a container");
      equal(standalone, WorkerDir.chooseBase(Map.of("LOCAL_DIRS", yarn.toString(), "SPARK_EXECUTOR_DIRS",
          standalone + ":" + yarn), yarn.toString(), "/var/tmp", name),
          "outside a YARN container: a standalone worker's executor dirs");
      equal(yarn, WorkerDir.chooseBase(Map.of(), yarn.toString(), "/var/tmp", name), "spark.local.dir");
      equal(Paths.get("/var/tmp"), WorkerDir.chooseBase(Map.of(), null, "/var/tmp", name), "java.io.tmpdir");
    } finally {
      WorkerDir.deleteTree(yarn);
      WorkerDir.deleteTree(standalone);
    }
  }

  public static void testAScratchDirTooLongForASocketFallsBackToTheTempDir() throws Exception {
    String name = "sparkstate-w-1000";
    Path base = Files.createTempDirectory("scratch");
    Path deep = base;
    while (WorkerDir.socketPathBytes(deep, name) <= WorkerDir.MAX_SOCKET_PATH_BYTES) {
      deep = deep.resolve("abcdefghij");
    }
    Path fits = deep.getParent();
    try {
      Files.createDirectories(deep);
      equal(fits, WorkerDir.chooseBase(Map.of("SPARK_LOCAL_DIRS", fits.toString()), null, "/var/tmp", name),
          "a scratch dir whose socket path fits is used");
      equal(Paths.get("/var/tmp"), WorkerDir.chooseBase(Map.of("SPARK_LOCAL_DIRS", deep.toString()), null,
          "/var/tmp", name), "one that does not: java.io.tmpdir");
      equal(Paths.get("/tmp"), WorkerDir.chooseBase(Map.of("SPARK_LOCAL_DIRS", deep.toString()), null,
          deep.toString(), name), "java.io.tmpdir too long as well: /tmp");
      check(WorkerDir.socketPathBytes(fits, name) <= 107 && WorkerDir.socketPathBytes(deep, name) > 107,
          "the limit is sun_path's 107 bytes");
    } finally {
      WorkerDir.deleteTree(base);
    }
  }

  public static void testTheRootIsPrivate() throws Exception {
    Path base = Files.createTempDirectory("base");
    try {
      Path root = WorkerDir.privateRoot(base);
      equal("rwx------", java.nio.file.attribute.PosixFilePermissions.toString(Files.getPosixFilePermissions(root)),
          "the root's mode");
      equal(root, WorkerDir.privateRoot(base), "an existing root of this user's is reused");
      WorkerDir dir = WorkerDir.createIn(root);
      check(dir.path().getParent().equals(root) && Files.exists(dir.path().resolve(WorkerDir.OWNER_LOCK)),
          "a worker directory holds its lock file");
      dir.delete();
    } finally {
      WorkerDir.deleteTree(base);
    }
  }
}
