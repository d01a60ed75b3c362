package io.sparkstate;

/**
 * The key filter a provider's last commit left, for the store the next batch loads: a store trusts a
 * filter only while it holds every key the loaded version has (see {@link StoreKeyFilter}), and a commit's
 * filter holds those of exactly the version (and attempt) it made. A version another executor committed,
 * or one rewritten offline, never matches: this provider did not commit it (a new query run makes new
 * providers).
 */
final class KeyFilterHandover {
  // guarded by this: a key filter holding every key of committed version `version` (attempt
  // `checkpointId` under checkpoint format v2), as the provider's last commit left it
  private KeyFilter filter;
  private long version = -1;
  private String checkpointId = "";

  /**
   * The key filter a store loaded at {@code version} may trust for its gets: a new one for an empty store;
   * the one the last commit left, if that commit made exactly this version (and attempt); else null, and
   * the store asks the worker until a full scan has shown it every key. None when {@code maxKeys} is 0.
   */
  synchronized KeyFilter forLoad(long version, String checkpointId, boolean empty, long maxKeys) {
    if (maxKeys == 0) {
      return null;
    }
    if (empty) {
      return new KeyFilter(maxKeys);
    }
    boolean sameAttempt = checkpointId.isEmpty() || checkpointId.equals(this.checkpointId);
    return filter != null && this.version == version && sameAttempt ? filter : null;
  }

  /** A store committed {@code version} with {@code filter} (null: it had none it could trust). */
  synchronized void committed(long version, String checkpointId, KeyFilter filter) {
    this.filter = filter;
    this.version = filter == null ? -1 : version;
    this.checkpointId = checkpointId;
  }

  /** Forgets the filter (the provider is closed). */
  synchronized void drop() {
    filter = null;
    version = -1;
  }
}
