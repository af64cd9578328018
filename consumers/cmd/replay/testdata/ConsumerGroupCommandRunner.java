// ConsumerGroupCommandRunner runs Apache Kafka's kafka-consumer-groups.sh
// (org.apache.kafka.tools.consumer.group.ConsumerGroupCommand) once per
// input line, in one JVM, so a table of cases costs one JVM start. Each
// line holds one invocation's arguments separated by tabs. For each it
// prints
//
//	@@case <n> exit <status>
//	<what the command printed on stdout>
//	@@stderr
//	<what it printed on stderr>
//	@@end
//
// The command's calls to Exit.exit are turned into an exception, so a
// usage error ends one case, not the JVM. Run with the kafka-tools jar and
// its dependencies on the class path:
//
//	java -cp "$CONCORD_KAFKA_CLASSPATH" ConsumerGroupCommandRunner.java < cases
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.common.utils.Exit;
import org.apache.kafka.tools.consumer.group.ConsumerGroupCommand;

public class ConsumerGroupCommandRunner {
    static final class Exited extends RuntimeException {
        final int status;

        Exited(int status) {
            super("exit " + status, null, false, false);
            this.status = status;
        }
    }

    public static void main(String[] ignored) throws Exception {
        Exit.setExitProcedure((status, message) -> {
            throw new Exited(status);
        });
        Exit.setHaltProcedure((status, message) -> {
            throw new Exited(status);
        });
        PrintStream out = System.out;
        PrintStream err = System.err;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        int n = 0;
        for (String line; (line = in.readLine()) != null; n++) {
            ByteArrayOutputStream caseOut = new ByteArrayOutputStream();
            ByteArrayOutputStream caseErr = new ByteArrayOutputStream();
            System.setOut(new PrintStream(caseOut, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(caseErr, true, StandardCharsets.UTF_8));
            int status = 0;
            try {
                ConsumerGroupCommand.main(line.split("\t"));
            } catch (Exited e) {
                status = e.status;
            } catch (Throwable t) {
                status = 99;
                t.printStackTrace();
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(out);
                System.setErr(err);
            }
            out.println("@@case " + n + " exit " + status);
            out.print(caseOut.toString(StandardCharsets.UTF_8));
            out.println("@@stderr");
            out.print(caseErr.toString(StandardCharsets.UTF_8));
            out.println("@@end");
            out.flush();
        }
    }
}
