package io.sparkstate;

import java.util.List;
import java.util.Map;
import scala.collection.JavaConverters;

/** Java and Scala 2.12 collections, for Spark 3.5's signatures (the 4.x builds have a Scala 2.13 twin). */
final class ScalaCollections {
  private ScalaCollections() {}

  static <T> scala.collection.Seq<T> seq(List<T> list) {
    return JavaConverters.asScalaBuffer(list).toSeq();
  }

  static <K, V> scala.collection.immutable.Map<K, V> map(Map<K, V> map) {
    scala.collection.immutable.Map<K, V> out = scala.collection.immutable.Map$.MODULE$.empty();
    for (Map.Entry<K, V> e : map.entrySet()) {
      out = out.updated(e.getKey(), e.getValue());
    }
    return out;
  }

  static <K, V> Map<K, V> asJava(scala.collection.Map<K, V> map) {
    return JavaConverters.mapAsJavaMap(map);
  }

  static <T> scala.collection.Iterator<T> iterator(java.util.Iterator<T> it) {
    return JavaConverters.asScalaIterator(it);
  }
}
