package site.ycsb.db.redisbaseline;

import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;

import redis.clients.jedis.Jedis;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;
import site.ycsb.StringByteIterator;

/**
 * Redis as YCSB 0.17's Redis binding uses it, for comparing phasedb against: a record is a hash
 * (HMSET/HGETALL/HMGET), inserts also add the key to a sorted set scored by the key's hash, which
 * scans read with ZRANGEBYSCORE. No multi-key transactions. Properties: {@code redis.host},
 * {@code redis.port}.
 */
public class RedisBaseline extends DB {
  private static final String INDEX = "_indices";
  private Jedis jedis;

  @Override
  public void init() throws DBException {
    Properties p = getProperties();
    jedis = new Jedis(p.getProperty("redis.host", "127.0.0.1"),
        Integer.parseInt(p.getProperty("redis.port", "6379")));
    jedis.connect();
  }

  @Override
  public void cleanup() throws DBException {
    jedis.close();
  }

  private static double hash(String key) {
    return key.hashCode();
  }

  @Override
  public Status read(String table, String key, Set<String> fields,
      Map<String, ByteIterator> result) {
    if (fields == null) {
      StringByteIterator.putAllAsByteIterators(result, jedis.hgetAll(key));
    } else {
      String[] names = fields.toArray(new String[0]);
      List<String> values = jedis.hmget(key, names);
      Iterator<String> v = values.iterator();
      for (String f : names) {
        result.put(f, new StringByteIterator(v.next()));
      }
    }
    return result.isEmpty() ? Status.ERROR : Status.OK;
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    if (jedis.hmset(key, StringByteIterator.getStringMap(values)).equals("OK")) {
      jedis.zadd(INDEX, hash(key), key);
      return Status.OK;
    }
    return Status.ERROR;
  }

  @Override
  public Status delete(String table, String key) {
    return jedis.del(key) == 0 && jedis.zrem(INDEX, key) == 0 ? Status.ERROR : Status.OK;
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    return jedis.hmset(key, StringByteIterator.getStringMap(values)).equals("OK")
        ? Status.OK : Status.ERROR;
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
      Vector<HashMap<String, ByteIterator>> result) {
    Set<String> keys = jedis.zrangeByScore(INDEX, hash(startkey), Double.POSITIVE_INFINITY, 0,
        recordcount);
    for (String key : keys) {
      HashMap<String, ByteIterator> values = new HashMap<>();
      read(table, key, fields, values);
      result.add(values);
    }
    return Status.OK;
  }
}
