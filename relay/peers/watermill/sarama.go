package main

import (
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// saramaConfig is watermill-kafka's synchronous publisher configuration
// with the stack's connection settings (CONCORD_KAFKA_TLS, _TLS_CA,
// _SASL_MECHANISM, _SASL_USER, _SASL_PASSWORD) and the same delivery
// settings as Concord's relay: acks from all in-sync replicas, idempotent.
func saramaConfig() (*sarama.Config, error) {
	c := kafkaDefaults()
	c.Version = sarama.V3_6_0_0
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Net.MaxOpenRequests = 1
	c.Producer.Partitioner = sarama.NewHashPartitioner // murmur2 is Java's; placement does not change the figures
	if os.Getenv("CONCORD_KAFKA_TLS") == "true" {
		pool := x509.NewCertPool()
		if ca := os.Getenv("CONCORD_KAFKA_TLS_CA"); ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return nil, err
			}
			pool.AppendCertsFromPEM(pem)
		}
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	switch m := strings.ToUpper(os.Getenv("CONCORD_KAFKA_SASL_MECHANISM")); m {
	case "":
	case "SCRAM-SHA-512":
		c.Net.SASL.Enable = true
		c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		c.Net.SASL.User = os.Getenv("CONCORD_KAFKA_SASL_USER")
		c.Net.SASL.Password = os.Getenv("CONCORD_KAFKA_SASL_PASSWORD")
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: scram.HashGeneratorFcn(sha512.New)} }
	default:
		return nil, fmt.Errorf("CONCORD_KAFKA_SASL_MECHANISM %q: only SCRAM-SHA-512 is wired here", m)
	}
	return c, c.Validate()
}

// scramClient adapts xdg-go/scram, the SCRAM implementation Sarama's own
// examples use, to Sarama's SCRAMClient.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (s *scramClient) Begin(user, password, authzID string) error {
	c, err := s.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *scramClient) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *scramClient) Done() bool                            { return s.conv.Done() }

func createTopic(brokers []string, c *sarama.Config, topic string, partitions int32) error {
	adm, err := sarama.NewClusterAdmin(brokers, c)
	if err != nil {
		return fmt.Errorf("connect to %v: %w", brokers, err)
	}
	defer adm.Close()
	return adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
}

func deleteTopic(brokers []string, c *sarama.Config, topic string) {
	if adm, err := sarama.NewClusterAdmin(brokers, c); err == nil {
		_ = adm.DeleteTopic(topic)
		adm.Close()
	}
}
