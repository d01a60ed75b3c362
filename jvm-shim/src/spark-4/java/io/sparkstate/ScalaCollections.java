package io.sparkstate;

import java.util.List;
import java.util.Map;
import scala.jdk.javaapi.CollectionConverters;

/** Java and Scala 2.13 collections, for Spark 4's signatures (the 3.5 build has a Scala 2.12 twin). */
final class ScalaCollections {
  private ScalaCollections() {}

  static <T> scala.collection.immutable.Seq<T> seq(List<T> list) {
    return CollectionConverters.asScala(list).toSeq();
  }

  static <K, V> scala.collection.immutable.Map<K, V> map(Map<K, V> map) {
    return scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(map));
  }

  static <K, V> Map<K, V> asJava(scala.collection.Map<K, V> map) {
    return CollectionConverters.asJava(map);
  }

  static <T> scala.collection.immutable.Set<T> set(java.util.Set<T> set) {
    return CollectionConverters.asScala(set).toSet();
  }

  static <T> scala.collection.Iterator<T> iterator(java.util.Iterator<T> it) {
    return CollectionConverters.asScala(it);
  }
}
