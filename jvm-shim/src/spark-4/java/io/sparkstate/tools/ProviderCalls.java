package io.sparkstate.tools;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import scala.Option;

/**
 * The provider calls {@link StateCopy} makes whose signature changed within Spark 4: {@code getStore} takes
 * {@code loadEmpty} from 4.2 on (two arguments before), read stores end with {@code release()} from 4.1 on
 * ({@code abort()} before). Looked up once by reflection, so one StateCopy serves every 4.x line.
 */
final class ProviderCalls {
  private static final Method GET_STORE_2 = method(StateStoreProvider.class, "getStore", long.class, Option.class);
  private static final Method RELEASE = method(ReadStateStore.class, "release");

  private ProviderCalls() {}

  /**
   * The write store at {@code version}; {@code loadEmpty} starts it empty: Spark's providers have it from
   * 4.2 on, sparkstate's on every 4.x line (its class declares the 4.2 method); else refused.
   */
  static StateStore getStore(StateStoreProvider provider, long version, boolean loadEmpty) {
    Method withLoadEmpty = method(provider.getClass(), "getStore", long.class, Option.class, boolean.class,
        boolean.class);
    if (withLoadEmpty != null) {
      return (StateStore) invoke(withLoadEmpty, provider, version, Option.empty(), false, loadEmpty);
    }
    if (loadEmpty) {
      throw new UnsupportedOperationException("copying state into " + provider.getClass().getName()
          + " needs a store started empty at a version (getStore's loadEmpty), which Spark has from 4.2 on");
    }
    return (StateStore) invoke(GET_STORE_2, provider, version, Option.empty());
  }

  /** Ends a read store: release() where Spark has it, abort() before. Never throws past a failure to end. */
  static void release(ReadStateStore store) {
    if (RELEASE != null) {
      invoke(RELEASE, store);
    } else {
      store.abort();
    }
  }

  private static Method method(Class<?> owner, String name, Class<?>... parameters) {
    try {
      return owner.getMethod(name, parameters);
    } catch (NoSuchMethodException absent) {
      return null;
    }
  }

  private static Object invoke(Method method, Object target, Object... args) {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException) {
        throw (RuntimeException) cause;
      }
      if (cause instanceof Error) {
        throw (Error) cause;
      }
      throw new IllegalStateException(cause);
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }
}
