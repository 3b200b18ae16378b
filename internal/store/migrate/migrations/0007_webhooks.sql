-- 0007: webhooks. The outbox holds task events for webhooks, written in the transaction
-- of the change each reports; deliveries are its events fanned out to the webhooks
-- that subscribe to them, with their retry state; attempts are the delivery log.
CREATE TABLE IF NOT EXISTS webhook_outbox (
  id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  kind       ENUM('submitted', 'dead', 'expired', 'released') NOT NULL,
  task_id    BIGINT UNSIGNED NOT NULL,
  fence      BIGINT UNSIGNED NOT NULL,
  holder     VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
  editor_id  BIGINT UNSIGNED NULL,
  category   VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  cause      VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  detail     VARCHAR(1024) NULL,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  fanned_out TINYINT(1) NOT NULL DEFAULT 0,
  PRIMARY KEY (id),
  KEY webhook_outbox_new (fanned_out, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS webhook_deliveries (
  event_id        BIGINT UNSIGNED NOT NULL,
  webhook         VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  status          ENUM('pending', 'delivered', 'failed') NOT NULL DEFAULT 'pending',
  attempts        INT NOT NULL DEFAULT 0,
  next_attempt_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  last_error      VARCHAR(1024) NULL,
  created_at      DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  done_at         DATETIME(3) NULL,
  PRIMARY KEY (event_id, webhook),
  KEY webhook_deliveries_due (webhook, status, next_attempt_at),
  KEY webhook_deliveries_status (status),
  CONSTRAINT webhook_deliveries_event FOREIGN KEY (event_id) REFERENCES webhook_outbox (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS webhook_attempts (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  event_id    BIGINT UNSIGNED NOT NULL,
  webhook     VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  attempt     INT NOT NULL,
  status_code INT NULL,
  error       VARCHAR(1024) NULL,
  duration_ms INT NOT NULL,
  `at`        DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY webhook_attempts_delivery (event_id, webhook, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
