-- GET /v1/seckill/{product_id}/order finds a buyer's last failed ticket by (product, user).
CREATE INDEX failed_tickets_product_user ON failed_tickets (product_id, user_id, failed_at);
