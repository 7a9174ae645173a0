-- compute_now() in PL/pgSQL. A SQL function whose body holds a subquery is never inlined,
-- so every statement that calls it parses and plans that body again; PL/pgSQL keeps the
-- plan for the session. Same result, same volatility: now() (the transaction's start)
-- plus the offset in compute_clock.
CREATE OR REPLACE FUNCTION compute_now() RETURNS timestamptz
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
BEGIN
    RETURN now() + (SELECT offset_interval FROM compute_clock);
END
$$;
