-- Health of an OLM v1 ClusterObjectSet (olm.operatorframework.io/v1), read from the conditions its
-- reconciler writes: Progressing, Available and Succeeded, with the reasons of OLM's
-- operator-controller (and of cos-externalizer, which writes the same ones).
--   Progressing False, Blocked/ProgressDeadlineExceeded -> Degraded: needs a person
--   Progressing True, Succeeded, with Available True   -> Healthy
--   Progressing False, Archived                        -> Healthy: retired for good, as asked (not
--     Suspended, which a sync wave waits on as it does on Progressing: archived never resumes)
--   anything else (RollingOut, Retrying, no status yet,
--   a status older than the spec, being deleted)       -> Progressing
-- Uses only the base library, so it runs with Argo CD's default useOpenLibs: false.
local hs = {}

local function condition(conditionType)
  if obj.status ~= nil and obj.status.conditions ~= nil then
    for _, c in ipairs(obj.status.conditions) do
      if c.type == conditionType then
        return c
      end
    end
  end
  return nil
end

local function text(c)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return nil
end

-- The Progressing message, followed by the Available message when it says something else (the
-- object a rollout waits on, and why).
local function detail(progressing, available)
  local msg = text(progressing) or ""
  local more = text(available)
  if more ~= nil and available.status ~= "True" and more ~= msg then
    if msg == "" then
      return more
    end
    return msg .. " " .. more
  end
  return msg
end

local progressing = condition("Progressing")
local available = condition("Available")

-- Deleting bumps metadata.generation: say so before the generation check. (The application
-- controller reports a resource being deleted as Progressing before it runs this check.)
if obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "Being deleted: the objects it controls are torn down first"
  return hs
end

if progressing == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the ClusterObjectSet to be reconciled"
  return hs
end

local generation = obj.metadata.generation
local observed = progressing.observedGeneration
if generation ~= nil and observed ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for generation " .. tostring(generation) .. " to be reconciled (status is of generation " .. tostring(observed) .. ")"
  return hs
end

if progressing.status == "False" and progressing.reason == "Archived" then
  hs.status = "Healthy"
  hs.message = text(progressing) or "revision is archived"
  return hs
end

if progressing.status == "False" then
  -- Blocked, ProgressDeadlineExceeded, or a reason this check does not know yet.
  hs.status = "Degraded"
  hs.message = detail(progressing, available)
  return hs
end

if progressing.status == "True" and progressing.reason == "Succeeded" and available ~= nil and available.status == "True" then
  hs.status = "Healthy"
  hs.message = text(progressing) or "Revision has rolled out."
  return hs
end

-- RollingOut, Retrying (a cause that may resolve itself: a Secret missing, a collision, teardown of
-- an archived revision), or an Unknown Progressing.
hs.status = "Progressing"
hs.message = detail(progressing, available)
return hs
