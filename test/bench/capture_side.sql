-- The hand-written capture the capture benchmarks compare with: a PL/pgSQL
-- AFTER ROW trigger writing the new row as jsonb to a side table, nothing
-- reading it.  The benchmarks create the triggers.
CREATE TABLE capture_side (id bigserial PRIMARY KEY, tbl text NOT NULL,
						   op text NOT NULL, data jsonb NOT NULL);

CREATE FUNCTION capture_side() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO capture_side (tbl, op, data) VALUES (TG_TABLE_NAME, TG_OP, to_jsonb(NEW));
	RETURN NULL;
END
$$;

