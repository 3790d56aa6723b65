-- wrk script of bench/serve.sh: each request POSTs one sentence to
-- /v1/embeddings, cycling through the file SERVE_SENTENCES names (one
-- sentence a line), each wrk thread from its own starting line.
local path = os.getenv("SERVE_SENTENCES")
local bodies = {}

local function json_string(s)
  s = s:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\t', '\\t'):gsub('\r', '\\r')
  return '"' .. s .. '"'
end

for line in io.lines(path) do
  if #line > 0 then
    bodies[#bodies + 1] = '{"input":' .. json_string(line) .. ',"model":"bench"}'
  end
end

local counter = 0
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end

function init(args)
  counter = id * 7919
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  counter = counter + 1
  return wrk.format(nil, nil, nil, bodies[(counter % #bodies) + 1])
end
