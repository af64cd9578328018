// GetDateTime prints, for each line of its input, what Apache Kafka's
// Utils.getDateTime (the parser of kafka-consumer-groups.sh --to-datetime)
// makes of it: the epoch milliseconds, or "error" and the message.
// Run with the kafka-clients jar on the class path:
//
//	java -cp "$CONCORD_KAFKA_CLASSPATH" GetDateTime.java < inputs
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.common.utils.Utils;

public class GetDateTime {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; ) {
            try {
                out.append(Utils.getDateTime(line)).append('\n');
            } catch (Exception e) {
                out.append("error ").append(e.getClass().getSimpleName()).append('\n');
            }
        }
        System.out.print(out);
    }
}
